"""The report runs unchanged on a Spark standalone cluster: a master and a worker started from the
installed pyspark on 127.0.0.1 (free ports, stopped by pid), the job submitted with `spark-submit
--master spark://...`, and its tables are the ones a `local` run writes, row for row."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from coordinator.history.export import write_partitioned
from pipeline.rebalance_report import TABLES, build, load, write
from tests.pipeline.test_report import hand_made, migrating
from tests.support.server import free_port, wait_until

ROOT = Path(__file__).resolve().parents[2]

# Four JVMs (master, worker, executor, driver) plus the local session: ~110 CPU-s, over a minute on
# two cores, so it runs with `pytest -m slow`.
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("java") is None and not os.environ.get("JAVA_HOME"),
                                 reason="a Spark cluster needs Java 17 (java on PATH or JAVA_HOME)")]


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def spark_env() -> dict[str, str]:
    return {**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": "127.0.0.1",
            "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": str(ROOT), "SPARK_NO_DAEMONIZE": "1"}


class Cluster:
    """A standalone master and one worker, each a JVM started by spark-class (which execs java, so
    the Popen pid is the JVM's)."""

    def __init__(self, tmp: Path) -> None:
        self.port, self.ui = free_port(), free_port()
        spark_class = str(spark_home() / "bin" / "spark-class")
        self.logs = [open(tmp / "master.log", "wb"), open(tmp / "worker.log", "wb")]  # noqa: SIM115 (closed in stop)
        self.master = subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(self.port),
             "--webui-port", str(self.ui)],
            stdout=self.logs[0], stderr=subprocess.STDOUT, env=spark_env())
        self.worker = subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--port", str(free_port()),
             "--webui-port", str(free_port()), "--cores", "2", "--memory", "1g", "--work-dir", str(tmp / "work"),
             self.url],
            stdout=self.logs[1], stderr=subprocess.STDOUT, env=spark_env())

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def status(self) -> dict[str, Any]:
        """The master's JSON status page."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui}/json/", timeout=5) as response:
            status: dict[str, Any] = json.load(response)
            return status

    def alive_workers(self) -> int:
        try:
            return int(self.status().get("aliveworkers", 0))
        except OSError:
            return 0

    def stop(self) -> None:
        for proc in (self.worker, self.master):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)
        for log in self.logs:
            log.close()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    running = Cluster(tmp_path)
    try:
        wait_until(lambda: running.alive_workers() >= 1, timeout=120, interval=0.5,
                   message="the worker registered with the master")
        yield running
    finally:
        running.stop()


def rows_of(directory: Path, spark: Any) -> dict[str, list[str]]:
    return {name: sorted(repr(sorted(r.asDict().items())) for r in spark.read.parquet(str(directory / name)).collect())
            for name in TABLES}


def test_spark_submit_to_a_standalone_cluster_writes_the_local_tables(spark: Any, cluster: Cluster, tmp_path: Path) -> None:
    dataset = tmp_path / "history"
    write_partitioned([*hand_made().rows, *migrating().rows], dataset)
    out = tmp_path / "cluster"
    submitted = subprocess.run(
        [str(spark_home() / "bin" / "spark-submit"), "--master", cluster.url, "--conf", "spark.executor.memory=512m",
         str(ROOT / "pipeline" / "rebalance_report.py"), "--input", str(dataset), "--output", str(out)],
        env=spark_env(), capture_output=True, text=True, timeout=280)
    assert submitted.returncode == 0, submitted.stdout[-2000:] + "\n".join(line for line in submitted.stderr.splitlines() if " INFO " not in line)[-2000:]
    assert [(a["name"], a["state"]) for a in cluster.status()["completedapps"]] == [("rebalance-report", "FINISHED")]
    local = tmp_path / "local"
    write(build(load(spark, [dataset])), local)

    on_cluster, on_local = rows_of(out / "tables", spark), rows_of(local / "tables", spark)
    assert on_cluster == on_local
    assert len(on_local["group_day"]) == 5  # g1, g3, c2 and m's two lifetimes
    assert json.loads((out / "summary.json").read_text()) == json.loads((local / "summary.json").read_text())
