"""The pipeline tests' requirements and their one local SparkSession per test module (a session
costs seconds to start).

Without pyspark or Java every test module here is collected as one skip that says what is missing.
The check runs when a module is collected, not when this conftest is imported: a skip raised while
pytest loads a conftest (as it does for `pytest tests/pipeline/test_cluster.py`) is reported as a
traceback, not as a skip."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

SPARK_FREE = frozenset({"test_requirements.py"})
"""Modules that run without pyspark and Java (they check how the others skip)."""


def missing_requirement() -> str | None:
    """Why the pipeline tests cannot run here, or None."""
    if importlib.util.find_spec("pyspark") is None:
        return "the pipeline tests need pyspark (pip install -e '.[test]')"
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "the pipeline tests need Java 17+ for Spark (java on PATH or JAVA_HOME)"
    return None


class Unrunnable(pytest.File):
    """A test module collected as one skip with the reason, without importing it."""

    reason: str = ""

    def collect(self) -> list[pytest.Item]:
        pytest.skip(self.reason)


def pytest_pycollect_makemodule(module_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    reason = missing_requirement()
    if reason is None or module_path.name in SPARK_FREE:
        return None
    collector = Unrunnable.from_parent(parent, path=module_path)
    collector.reason = reason
    return collector


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
