"""The shard supervisor (`coordinator serve` with `coordinator.shards=2`) as an operator sees it:
one /metrics for every shard, /readyz over all of them, a SIGKILLed shard restarted with its
groups as they were, SIGTERM draining everything, a shard that cannot start stopping the server
with one line, children dying with a killed supervisor, and a second supervisor waiting."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import psutil
from prometheus_client.parser import text_string_to_metric_families

from coordinator.node.supervisor import try_lock
from coordinator.recordlog.lock import LOCK_FILE_NAME
from tests.shards.supervised import Supervised, create_topics, free_ports, gone, group_on_shard
from tests.support.server import http_get, wait_until
from tests.support.wire import WireClient, request

CGH, CGD = 68, 69
TOPIC = "events"



def log_events(server: Supervised, event: str) -> list[dict[str, Any]]:
    found = []
    for line in server.log().splitlines():
        if line.startswith("{"):
            entry = json.loads(line)
            if entry.get("event") == event:
                found.append(entry)
    return found


def test_one_metrics_endpoint_labels_every_shard_and_sigterm_drains_all(tmp_path: Path) -> None:
    server = Supervised(tmp_path / "data").start()
    try:
        pids = wait_until(lambda: len(kids := server.children()) == 2 and kids, message="two shards")
        assert http_get(server.metrics_port, "/healthz")[0] == 200
        assert http_get(server.metrics_port, "/readyz") == (200, b"ready\n")
        text = server.metrics_text()
        families = {f.name: f for f in text_string_to_metric_families(text)}
        ready = {s.labels["shard"]: s.value for s in families["coordinator_ready"].samples}
        assert ready == {"0": 1.0, "1": 1.0}
        rss = {s.labels["shard"] for s in families["process_resident_memory_bytes"].samples}
        assert rss == {"0", "1"}
        assert {s.labels["shard"]: s.value for s in families["coordinator_shard_up"].samples} == {"0": 1.0, "1": 1.0}
        # HELP and TYPE once per family, however many shards carry it.
        assert text.count("# TYPE coordinator_ready gauge") == 1
        assert text.count("# HELP process_resident_memory_bytes ") == 1
        assert server.terminate() == 0
        assert all(gone(pid) for pid in pids.values())
        assert len(log_events(server, "server_stopped")) == 2  # each shard drained and stopped
        assert log_events(server, "shard_exited") == []
    finally:
        server.stop()


async def join_and_settle(port: int, group: str) -> tuple[str, int, set[int]]:
    """A KIP-848 member joins `group` on the node at `port` and acknowledges its assignment."""
    client = await WireClient.connect(port)
    try:
        member = str(uuid.uuid4())
        joined = await client.request(request(
            CGH, 1, group_id=group, member_id=member, member_epoch=0, rebalance_timeout=300_000,
            subscribed_topic_names=[TOPIC], subscribed_topic_regex="", topic_partitions=[]))
        assert joined.error_code == 0, joined
        assert joined.assignment is not None
        owned = [{"topic_id": tp.topic_id, "partitions": sorted(tp.partitions)} for tp in joined.assignment.topic_partitions]
        acked = await client.request(request(CGH, 1, group_id=group, member_id=member, member_epoch=joined.member_epoch,
                                             topic_partitions=owned))
        assert acked.error_code == 0, acked
        return member, acked.member_epoch, {p for tp in owned for p in tp["partitions"]}
    finally:
        await client.close()


async def describe(port: int, group: str) -> dict[str, tuple[int, frozenset[int]]]:
    client = await WireClient.connect(port)
    try:
        response = await client.request(request(CGD, 1, group_ids=[group], include_authorized_operations=False))
    finally:
        await client.close()
    (described,) = response.groups
    assert described.error_code == 0, described
    return {m.member_id: (m.member_epoch, frozenset(p for tp in m.assignment.topic_partitions for p in tp.partitions))
            for m in described.members}


async def heartbeat(port: int, group: str, member: str, epoch: int) -> tuple[int, int]:
    client = await WireClient.connect(port)
    try:
        response = await client.request(request(CGH, 1, group_id=group, member_id=member, member_epoch=epoch,
                                                topic_partitions=None))
    finally:
        await client.close()
    return response.error_code, response.member_epoch


def test_a_sigkilled_shard_is_restarted_and_its_kip848_member_keeps_id_epoch_and_partitions(tmp_path: Path) -> None:
    create_topics(tmp_path / "data", {TOPIC: 4})
    group = group_on_shard(1, 2, "kept")
    server = Supervised(tmp_path / "data").start()
    try:
        port = server.shard_port(1)
        member, epoch, partitions = asyncio.run(join_and_settle(port, group))
        assert partitions == {0, 1, 2, 3}
        before = asyncio.run(describe(port, group))
        assert before == {member: (epoch, frozenset(partitions))}
        survivor = server.children()[0]

        old = server.kill_shard(1)
        new = server.wait_restarted(1, old)
        assert new != old
        assert server.children()[0] == survivor, "the other shard was not touched"
        assert asyncio.run(describe(port, group)) == before, "member id, epoch or partitions changed"
        assert asyncio.run(heartbeat(port, group, member, epoch)) == (0, epoch), "a new epoch after the restart"

        exited = log_events(server, "shard_exited")
        assert [(e["shard"], e["pid"], e["status"]) for e in exited] == [(1, old, "killed by SIGKILL")]
        restarts = {s.labels["shard"]: s.value for f in text_string_to_metric_families(server.metrics_text())
                    if f.name == "coordinator_shard_restarts" for s in f.samples if s.name.endswith("_total")}
        assert restarts == {"0": 0.0, "1": 1.0}
    finally:
        server.stop()


def test_a_shard_that_cannot_start_stops_the_server_with_one_line(tmp_path: Path) -> None:
    port = free_ports(2)
    with socket.socket() as taken:  # shard 1's port (port + 1) is someone else's
        taken.bind(("127.0.0.1", port + 1))
        taken.listen()
        proc = subprocess.run(
            [sys.executable, "-m", "coordinator", "serve", "--listen", f"127.0.0.1:{port}",
             "--metrics-listen", f"127.0.0.1:{free_ports(1)}", "--data-dir", str(tmp_path / "data"),
             "--override", "coordinator.shards=2", "--log-format", "json"],
            capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [
        f"coordinator: cannot start: shard 1 (node 2): listeners PLAINTEXT://127.0.0.1:{port + 1}: "
        "Address already in use"], proc.stderr
    stopping = [json.loads(line) for line in proc.stdout.splitlines() if '"supervisor_stopping"' in line]
    assert [e["reason"] for e in stopping] == ["cannot start"]
    assert '"shard_exited"' not in proc.stdout  # not mistaken for a crash: nothing restarted


def test_children_die_with_a_sigkilled_supervisor(tmp_path: Path) -> None:
    server = Supervised(tmp_path / "data").start()
    pids: dict[int, int] = {}
    try:
        pids = wait_until(lambda: len(kids := server.children()) == 2 and kids, message="two shards")
        assert server.proc is not None
        server.proc.send_signal(signal.SIGKILL)
        server.proc.wait(10)
        wait_until(lambda: all(gone(pid) for pid in pids.values()), timeout=20, message="orphaned shards to exit")
    finally:
        server.stop()
        for pid in pids.values():
            if not gone(pid):
                psutil.Process(pid).kill()


def test_a_second_supervisor_waits_for_the_first_and_then_takes_over(tmp_path: Path) -> None:
    first = Supervised(tmp_path / "data").start()
    second = Supervised(tmp_path / "data", port=first.port, metrics_port=first.metrics_port)
    second.log_path = tmp_path / "second.log"
    try:
        second.start(wait=False)
        wait_until(lambda: log_events(second, "supervisor_standby_waiting"), message="the second to wait")
        assert second.children() == {}, "a waiting supervisor starts no shard"
        old = first.children()
        assert first.proc is not None
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait(10)
        wait_until(lambda: log_events(second, "supervisor_standby_takeover"), timeout=20, message="takeover")
        wait_until(second.ready, timeout=30, message="the second supervisor's shards ready")
        assert set(second.children()) == {0, 1}
        assert all(gone(pid) for pid in old.values())
    finally:
        second.stop()
        first.stop()


def test_a_shard_killed_again_while_restarting_is_restarted_not_fatal(tmp_path: Path) -> None:
    """Only a shard that never became ready since the supervisor started, or one that says it
    cannot start (exit code 2), stops the server: a restart killed before it is ready is retried.
    The test holds shard 1's lock, so its restarted process waits as a standby and cannot be ready."""
    server = Supervised(tmp_path / "data").start()
    lock = tmp_path / "data" / "shards" / "1" / LOCK_FILE_NAME
    held: int | None = None
    try:
        while held is None:  # kill shard 1 until the test, not a restarted shard, has its lock
            old = server.kill_shard(1)
            wait_until(lambda old=old: gone(old), message="the killed shard to exit")
            held = wait_until(lambda old=old: try_lock(lock) or (server.children().get(1) not in (None, old) and -1),
                              message="shard 1's lock or its next process")
            if held == -1:
                held = None
        standby = wait_until(lambda: server.children().get(1), message="shard 1 restarted")
        wait_until(lambda: len(log_events(server, "standby_waiting")) == 1, message="the restarted shard waiting")
        assert http_get(server.metrics_port, "/readyz")[0] == 503, "ready with shard 1 not loaded"
        assert http_get(server.metrics_port, "/healthz")[0] == 200
        psutil.Process(standby).kill()
        wait_until(lambda: server.children().get(1) not in (None, standby), message="shard 1 restarted again")
        statuses = [(e["status"], e["was_ready"]) for e in log_events(server, "shard_exited")]
        assert statuses[-1] == ("killed by SIGKILL", False) and statuses[0] == ("killed by SIGKILL", True)
        os.close(held)
        held = None
        wait_until(server.ready, timeout=30, message="every shard ready once the lock is free")
        assert server.proc is not None and server.proc.poll() is None
    finally:
        if held is not None:
            os.close(held)
        server.stop()
