"""`bench/run --quick --tiny` end to end, so the suite and the load generator cannot rot.

Only the shape of the report is checked: every section ran and produced its rows. No timing
assertion: speed is measured by the suite, never by tests.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

EXPECTED_ROWS = [
    ("Heartbeat v4 throughput", "canned responses"),
    ("Heartbeat v4 throughput", "decode-only (kio)"),
    ("Heartbeat v4 throughput", "coordinator"),
    ("ConsumerGroupHeartbeat v1 throughput", "canned responses"),
    ("ConsumerGroupHeartbeat v1 throughput", "decode-only (kio)"),
    ("ConsumerGroupHeartbeat v1 throughput", "coordinator"),
    ("heartbeat latency", "coordinator"),
    ("server RSS", "coordinator"),
    ("join and settle", "coordinator"),
    ("KIP-848 (uniform, server-side)", "coordinator"),
    ("classic eager (range)", "coordinator"),
    ("classic cooperative-sticky", "coordinator"),
    ("KIP-848 join storm", "coordinator"),
    ("uniform assignor", "in process"),
    ("streams task assignor (sticky)", "in process"),
    ("start-up replay", "in process"),
    ("log.flush.policy=always", "coordinator"),
    ("log.flush.policy=interval", "coordinator"),
    ("log.flush.policy=none", "coordinator"),
    ("Produce 1 KB through the sidecar", "coordinator (sidecar)"),
    ("ConsumerGroupHeartbeat v1 steady throughput", "coordinator, 1 shard"),
    ("ConsumerGroupHeartbeat v1 steady throughput", "coordinator, 2 shards"),
    ("ConsumerGroupHeartbeat v1 steady throughput", "decode-only"),
    ("ConsumerGroupHeartbeat v1 steady throughput", "2 shards ÷ 1 shard"),
    ("heartbeat latency", "coordinator, 2 shard(s)"),
    ("RSS over all shard processes", "coordinator, 2 shard(s)"),
    ("members fenced while joining", "coordinator, 2 shard(s)"),
    ("log.flush.policy=always (fsync per batch)", "coordinator, 2 shards"),
    ("ConsumerGroupHeartbeat v1 steady throughput", "Apache Kafka (BENCH_KAFKA)"),
    ("CPU per steady ConsumerGroupHeartbeat v1", "coordinator vs Apache Kafka 4.0"),
    ("CPU per member joining a group of 10 ", "coordinator vs Apache Kafka 4.0"),
    ("CPU per OffsetCommit v8", "coordinator vs Apache Kafka 4.0"),
    ("OffsetCommit v8 closed loop", "log upstream vs local"),
    ("KIP-848 join, first heartbeat to assignment", "log upstream vs local"),
    ("takeover: SIGKILL of the owner", "3 instances, log upstream"),
    ("start-up replay of the log topic", "1 instance, log upstream"),
    ("Streams scale-out 2 -> 3", "coordinator"),
    ("plain consumer group, 1 consumer, 1 partition", "coordinator"),
    ("share group, 1 consumer, 1 partition", "coordinator"),
    ("share group, 4 consumers, 1 partition", "coordinator"),
    ("share group, 4 consumers, 2 partitions", "coordinator"),
    ("confluent-kafka ShareConsumer, 1, 1 partition", "coordinator"),
    ("confluent-kafka ShareConsumer, 4 (one process each), 1 partition", "coordinator"),
]


# About a minute (every section of the suite, servers included): slow. Each section that needs
# Kafka has its own default-suite test of the report's shape without it (test_kafka_side.py,
# test_clusterlog_bench.py) and the hot path its own (test_hotpath_smoke.py).
@pytest.mark.slow
def test_quick_tiny_run_reports_every_row(tmp_path: Path) -> None:
    report = tmp_path / "BENCHMARKS.md"
    # The side-by-side section runs without Kafka here (its rows say why); with a real Kafka it is
    # tests/bench/test_kafka_side.py's slow test.
    env = {k: v for k, v in os.environ.items() if k != "BENCH_KAFKA"} | {"KAFKA_HOME": str(tmp_path / "none")}
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "run"), "--quick", "--tiny", "--strict", "--output", str(report)],
        cwd=ROOT, capture_output=True, text=True, timeout=360, env=env,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    text = report.read_text()
    for heading in ("## Machine", "## Results", "| nproc |", "| CPU |", "| Python |", "| uvloop |"):
        assert heading in text
    rows = [line for line in text.splitlines() if line.startswith("| ") and " | " in line]
    for benchmark, server in EXPECTED_ROWS:
        matching = [r for r in rows if benchmark in r and f"| {server} |" in r]
        assert matching, f"no row for {benchmark!r} on {server!r} in:\n{text}"
        assert all("failed:" not in r and "timed out" not in r for r in matching), matching
