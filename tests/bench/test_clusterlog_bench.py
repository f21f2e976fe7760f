"""The cluster log's section (`bench/clusterlog_bench.py`, `bench/run --only clusterlog`) end to end
at its smoke-test sizes: every measure gets its row, upstream beside local where the issue asks for
both, with the load average; or, without Kafka, every row says why. Only the report's shape is
checked, never a timing: speed is measured by the suite, not by tests. The run beside a real Kafka is
slow-marked (a JVM and four coordinator instances start); the run without one is in the default
suite."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench import kafka_side

ROOT = Path(__file__).resolve().parents[2]

MEASURES = [
    "OffsetCommit v8 closed loop",
    "KIP-848 join, first heartbeat to assignment",
    "takeover: SIGKILL of the owner to the first answered OffsetCommit on the new owner",
    "start-up replay of the log topic",
]
LOAD = re.compile(r"load \d+\.\d\d → \d+\.\d\d")


def _tiny_run(tmp_path: Path, env: dict[str, str]) -> list[str]:
    report = tmp_path / "BENCHMARKS.md"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "run"), "--quick", "--tiny", "--strict", "--only", "clusterlog",
         "--output", str(report)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env=env,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return [line for line in report.read_text().splitlines()
            if line.startswith("| ") and any(measure in line for measure in MEASURES)]


def _row(rows: list[str], measure: str) -> str:
    matching = [r for r in rows if measure in r]
    assert len(matching) == 1, f"{measure!r} in {rows}"
    assert "failed:" not in matching[0]
    return matching[0]


@pytest.mark.slow  # Kafka's JVM, then five coordinator instances one after another: about a minute
def test_every_measure_is_reported_upstream_beside_local_with_the_load(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "BENCH_KAFKA"}
    home, why = kafka_side.kafka_home()
    if home is None:
        pytest.skip(why)
    rows = _tiny_run(tmp_path, env)
    assert len(rows) == len(MEASURES), rows
    commits = _row(rows, MEASURES[0])
    assert re.search(r"upstream [\d,]+ req/s, p99 [\d.]+ ms; local \(fsync\) [\d,]+ req/s, p99 [\d.]+ ms; ratio", commits)
    assert "errors" not in commits
    joins = _row(rows, MEASURES[1])
    assert re.search(r"upstream p50 [\d.]+ ms, p99 [\d.]+ ms; local p50 [\d.]+ ms, p99 [\d.]+ ms", joins)
    takeover = _row(rows, MEASURES[2])
    assert re.search(r"[\d.]+ s \(coordinator\.log\.session\.timeout\.ms=\d+", takeover)
    replay = _row(rows, MEASURES[3])
    assert re.search(r"[\d,]+ records/s \([\d,]+ records read in [\d.]+ s", replay)
    for row in rows:
        assert LOAD.search(row), row


def test_a_missing_kafka_is_named_in_every_row(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "BENCH_KAFKA"}
    env["KAFKA_HOME"] = str(tmp_path / "no-kafka-here")
    rows = _tiny_run(tmp_path, env)
    assert len(rows) == len(MEASURES), rows
    for measure in MEASURES:
        assert f"not run: KAFKA_HOME={tmp_path / 'no-kafka-here'} holds no bin/kafka-server-start.sh" in \
            _row(rows, measure)
