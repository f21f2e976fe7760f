"""The operator tools cover every shard of a sharded data directory: `coordinator log
dump|verify|compact` and `coordinator history export`, all shards by default, one with `--shard K`.

The data directory is written by two real shard processes (`serve --shard K`) whose groups were
formed over raw kio requests, each group on its own shard's node.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from coordinator.cli import main
from coordinator.recordlog import LogEntry, RealFileSystem
from coordinator.recordlog.lock import try_lock_data_dir
from coordinator.shards.placement import ShardLayout, shard_data_dir
from coordinator.shards.reshard import ensure_layout
from tests.shards.test_reshard import PARTITIONS, group_records, make_logs, write_layout_logs
from tests.shards.test_reshard_server import TOPIC, call, request
from tests.support.server import free_port_block
from tests.support.shard_process import running_shards

pytestmark = pytest.mark.interop

LAYOUT = ShardLayout(PARTITIONS, 2)
GROUPS = [f"tools-{i}" for i in range(8)]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """`coordinator ARGS` in this process (the command line's own `main`; a process each would cost
    seconds apiece on a loaded machine)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())


def cli_process(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "coordinator", *args], capture_output=True, text=True, timeout=120)


async def join_each(ports: list[int]) -> None:
    created = await call(ports[0], request(19, 7, topics=[{"name": TOPIC, "num_partitions": 2, "replication_factor": -1,
                                                           "assignments": [], "configs": []}], timeout=5000))
    assert created.topics[0].error_code == 0
    for group in GROUPS:
        joined = await call(ports[LAYOUT.shard_of_group(group)], request(
            68, 1, group_id=group, member_id=str(uuid.uuid4()), member_epoch=0, rebalance_timeout=300_000,
            subscribed_topic_names=[TOPIC], subscribed_topic_regex="", topic_partitions=[]))
        assert joined.error_code == 0, joined


@pytest.fixture(scope="module")
def sharded_dir(tmp_path_factory) -> Iterator[Path]:
    """Two shards' data directory: groups joined on their shards, then every shard stopped."""
    assert {LAYOUT.shard_of_group(g) for g in GROUPS} == {0, 1}
    root = tmp_path_factory.mktemp("tools") / "data"
    ensure_layout(root, LAYOUT)
    port = free_port_block(2)
    with running_shards(root, 2, port) as shards:
        asyncio.run(join_each([s.node_port for s in shards]))
    yield root


def groups_in(lines: list[dict]) -> dict[int, set[str]]:
    out: dict[int, set[str]] = {}
    for line in lines:
        for record in line["records"]:
            key = record["key"] or {}
            group = key.get("group_id") or key.get("group")
            if group is not None:
                out.setdefault(line["shard"], set()).add(group)
    return out


def test_log_dump_covers_every_shard_and_one_with_shard(sharded_dir: Path) -> None:
    done = cli_process("log", "dump", "--data-dir", str(sharded_dir))
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    found = groups_in(lines)
    assert found == {k: {g for g in GROUPS if LAYOUT.shard_of_group(g) == k} for k in (0, 1)}
    one = cli("log", "dump", "--data-dir", str(sharded_dir), "--shard", "1")
    assert one.returncode == 0, one.stderr
    lines = [json.loads(line) for line in one.stdout.splitlines()]
    assert lines and {line["shard"] for line in lines} == {1}


def test_log_verify_checks_every_shard(sharded_dir: Path) -> None:
    done = cli("log", "verify", "--data-dir", str(sharded_dir))
    assert done.returncode == 0, done.stdout + done.stderr
    reports = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["shard"] for r in reports] == [0, 1]
    assert all(r["problems"] == [] and r["records"] > 0 for r in reports)


def test_log_compact_compacts_each_stopped_shard_and_refuses_a_running_one(sharded_dir: Path) -> None:
    done = cli("log", "compact", "--data-dir", str(sharded_dir))
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["shard"] for line in done.stdout.splitlines()] == [0, 1]
    lock = try_lock_data_dir(RealFileSystem(), str(shard_data_dir(sharded_dir, 1)))
    assert lock is not None
    try:
        refused = cli("log", "compact", "--data-dir", str(sharded_dir))
    finally:
        lock.release()
    assert refused.returncode == 1
    assert [json.loads(line)["shard"] for line in refused.stdout.splitlines()] == [0]
    assert refused.stderr.strip().count("\n") == 0 and "running shard 1" in refused.stderr


def test_a_shard_the_layout_does_not_have_is_one_line(sharded_dir: Path) -> None:
    for args in (("log", "dump"), ("log", "verify"), ("log", "compact")):
        done = cli(*args, "--data-dir", str(sharded_dir), "--shard", "2")
        assert done.returncode == 2
        assert done.stderr.strip() == f"coordinator: --shard 2: {sharded_dir} has 2 shard(s) (0 to 1)"


def test_history_export_merges_every_shard_and_picks_one_with_shard(sharded_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "all.jsonl"
    done = cli("history", "export", "--data-dir", str(sharded_dir), "--output", str(out))
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    by_node: dict[int, set[str]] = {}
    for row in rows:
        by_node.setdefault(row["node_id"], set()).add(row["group_id"])
    # node.id 1 is shard 0's, node 2 shard 1's: each wrote its own groups' history.
    assert by_node == {1 + k: {g for g in GROUPS if LAYOUT.shard_of_group(g) == k} for k in (0, 1)}
    assert [r["ts_ms"] for r in rows] == sorted(r["ts_ms"] for r in rows)
    one = tmp_path / "one.jsonl"
    done = cli("history", "export", "--data-dir", str(sharded_dir), "--output", str(one), "--shard", "1")
    assert done.returncode == 0, done.stderr
    assert {json.loads(line)["node_id"] for line in one.read_text().splitlines()} == {2}
    missing = cli("history", "export", "--data-dir", str(sharded_dir), "--output", str(one), "--shard", "7")
    assert missing.returncode == 1 and "no history in shard 7" in missing.stderr


def test_log_verify_reports_a_group_in_another_shards_log(tmp_path: Path) -> None:
    root = tmp_path / "data"
    logs = make_logs(2)
    stray = next(f"stray-{i}" for i in range(100) if LAYOUT.shard_of_group(f"stray-{i}") == 1)
    logs[0].append(LogEntry(len(logs[0]), 5000, 1, group_records(stray, 1)[1]))  # shard 1's group in shard 0's log
    write_layout_logs(root, logs)
    done = cli("log", "verify", "--data-dir", str(root))
    assert done.returncode == 1
    reports = [json.loads(line) for line in done.stdout.splitlines()]
    placement = [[p for p in r["problems"] if "belongs to" in p] for r in reports]
    assert placement == [[f"offset {len(logs[0]) - 1}: group {stray!r} belongs to shard 1"], []]
