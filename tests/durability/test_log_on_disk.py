"""The record log as an operator meets it: torn tails at start-up, background compaction, and the
`coordinator log` tools."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest
from kio.schema.offset_commit.v8.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)

from tests.durability.test_kill_restart import committed_offset
from tests.support.metrics import scrape
from tests.support.server import ServerProcess, wait_until
from tests.support.wire import WireClient

pytestmark = pytest.mark.interop

TOPIC = {"topics": "t:4"}
"""The topic the commits name (OffsetCommit refuses topics the catalog does not know)."""


async def commit_many(port: int, group: str, offsets: range, partitions: int = 4) -> None:
    client = await WireClient.connect(port)
    try:
        for offset in offsets:
            request = OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                                          topics=(OffsetCommitRequestTopic(name="t", partitions=tuple(
                                              OffsetCommitRequestPartition(partition_index=p, committed_offset=offset,
                                                                           committed_leader_epoch=-1, committed_metadata="x" * 200)
                                              for p in range(partitions))),))
            response = await client.request(request)
            assert all(p.error_code == 0 for t in response.topics for p in t.partitions)
    finally:
        await client.close()


def segments(data) -> list:
    return sorted((data / "log").glob("*.log"))


def log_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "coordinator", "log", *args], capture_output=True, text=True, timeout=60)


def test_torn_tail_is_truncated_with_a_warning_and_acknowledged_data_kept(tmp_path) -> None:
    data = tmp_path / "data"
    server = ServerProcess(data, overrides=TOPIC).start()
    try:
        asyncio.run(commit_many(server.port, "g", range(1, 11)))
        server.stop()
        active = segments(data)[-1]
        with open(active, "ab") as f:
            f.write(b"\x00\x00\x01\x00garbage-that-was-never-acknowledged")  # a frame cut short by a crash
        assert log_cli("verify", "--data-dir", str(data)).returncode == 1
        server.start()
        assert asyncio.run(committed_offset(server.port, "g", "t")) == 10
        warnings = [json.loads(line) for line in server.log().splitlines()
                    if line.startswith("{") and "log_tail_truncated" in line]
        assert warnings and warnings[-1]["bytes_dropped"] == 4 + len(b"garbage-that-was-never-acknowledged")
        server.stop()
        assert log_cli("verify", "--data-dir", str(data)).returncode == 0
    finally:
        server.stop()


def test_background_compaction_shrinks_the_log_and_keeps_the_latest_offsets(tmp_path) -> None:
    data = tmp_path / "data"
    server = ServerProcess(data, overrides={**TOPIC, "log.segment.bytes": "16384", "log.cleaner.backoff.ms": "50"}).start()
    try:
        asyncio.run(commit_many(server.port, "g", range(1, 301)))
        wait_until(lambda: scrape(server.metrics_port).get('coordinator_log_compactions_total{outcome="ok"}', 0) >= 1,
                   timeout=90, message="a compaction run")
        wait_until(lambda: len(segments(data)) <= 3, timeout=90, message="closed segments merged")
        size_after = scrape(server.metrics_port)["coordinator_log_bytes"]
        assert size_after < 300 * 4 * 200, "compaction kept superseded commits"
        server.stop()
        server.start()
        assert asyncio.run(committed_offset(server.port, "g", "t")) == 300
    finally:
        server.stop()


def test_offline_tools_refuse_a_running_server_and_work_on_a_stopped_one(tmp_path) -> None:
    data = tmp_path / "data"
    server = ServerProcess(data, overrides={**TOPIC, "log.segment.bytes": "16384"}).start()
    try:
        asyncio.run(commit_many(server.port, "g", range(1, 101)))
        refused = log_cli("compact", "--data-dir", str(data))
        assert refused.returncode == 1 and "in use" in refused.stderr
        dumped = log_cli("dump", "--data-dir", str(data))  # read-only: fine while running
        assert dumped.returncode == 0
        entries = [json.loads(line) for line in dumped.stdout.splitlines()]
        commits = [r for e in entries for r in e["records"] if r["type"] == "OffsetCommit"]
        assert len(commits) == 400
        assert any(r["type"] == "CoordinatorEpoch" for e in entries for r in e["records"])
        server.stop()
        before = len(segments(data))
        compacted = log_cli("compact", "--data-dir", str(data))
        assert compacted.returncode == 0, compacted.stderr
        report = json.loads(compacted.stdout)
        assert report["superseded_dropped"] > 0
        assert len(segments(data)) < before
        assert log_cli("verify", "--data-dir", str(data)).returncode == 0
        server.start()
        assert asyncio.run(committed_offset(server.port, "g", "t")) == 100
    finally:
        server.stop()
