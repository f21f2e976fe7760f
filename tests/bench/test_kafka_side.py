"""The side-by-side section (`bench/kafka_side.py`, `bench/run --only kafka`) end to end at its
smoke-test sizes: every measure gets its row, each row carries the load average, and either
Kafka's warm and cold numbers with the ratio, or why Kafka was not run. Only the report's shape is
checked, never a timing: speed is measured by the suite, not by tests. The run beside a real
Kafka is slow-marked (a JVM's start); the run without one is in the default suite."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench import kafka_side

ROOT = Path(__file__).resolve().parents[2]

MEASURES = [
    "CPU per steady ConsumerGroupHeartbeat v1 at 300 req/s",
    "closed-loop ConsumerGroupHeartbeat v1",
    "CPU per member joining a group of 10 ",
    "join to stable, group of 10 ",
    "CPU per OffsetCommit v8 at 200 req/s",
]


def _tiny_run(tmp_path: Path, env: dict[str, str]) -> list[str]:
    report = tmp_path / "BENCHMARKS.md"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "run"), "--quick", "--tiny", "--strict", "--only", "kafka",
         "--output", str(report)],
        cwd=ROOT, capture_output=True, text=True, timeout=180, env=env,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return [line for line in report.read_text().splitlines() if line.startswith("| ") and " vs Apache Kafka" in line]


def _row(rows: list[str], measure: str) -> str:
    matching = [r for r in rows if measure in r]
    assert len(matching) == 1, f"{measure!r} in {rows}"
    assert "load " in matching[0] and "failed:" not in matching[0]
    return matching[0]


@pytest.mark.slow  # a JVM's format, start and stop: about 25 s on this machine
def test_every_measure_is_reported_beside_kafka_or_says_why_not(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "BENCH_KAFKA"}
    rows = _tiny_run(tmp_path, env)
    home, why = kafka_side.kafka_home()
    for measure in MEASURES:
        row = _row(rows, measure)
        if home is None:
            assert f"Kafka not run: {why}" in row
        else:
            assert " warm" in row and "cold (warm-up cycle)" in row and "ratio **" in row
            if "CPU per" in measure and "joining" not in measure:  # the fixed-rate rows
                assert "net of idle CPU" in row
    assert "without" in _row(rows, "CPU per OffsetCommit")  # ours with fsync and without, side by side


def test_a_missing_kafka_is_named_in_every_row(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "BENCH_KAFKA"}
    env["KAFKA_HOME"] = str(tmp_path / "no-kafka-here")
    rows = _tiny_run(tmp_path, env)
    for measure in MEASURES:
        row = _row(rows, measure)
        assert f"Kafka not run: KAFKA_HOME={tmp_path / 'no-kafka-here'} holds no bin/kafka-server-start.sh" in row
        assert "ours " in row


def test_cpu_is_counted_over_every_thread() -> None:
    before = kafka_side.task_cpu_ns(os.getpid())
    deadline = time.thread_time() + 0.05
    while time.thread_time() < deadline:
        pass
    assert kafka_side.task_cpu_ns(os.getpid()) - before >= 40_000_000
