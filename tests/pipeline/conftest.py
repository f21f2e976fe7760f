"""One local SparkSession per test module (a session costs seconds to start)."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="the pipeline tests need pyspark (pip install -e '.[test]')")

if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("the pipeline tests need Java 17+ for Spark (java on PATH or JAVA_HOME)", allow_module_level=True)


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("REPORT_SHUFFLE_PARTITIONS", "2")
    from pipeline.rebalance_report import spark_session

    session = spark_session("local[2]", app="pipeline-tests")
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()
