"""Hostile input at a live server (issue 17, point 5): the structure-aware fuzzer of
`bench/fuzz_wire.py` sends valid frames with hostile field values, mutated and truncated frames and
junk. Afterwards the server is alive, no handler raised, and a real consumer group still forms and
commits. The default suite sends 5,000 frames; `-m slow` sends 1,000,000 (BENCHMARKS.md reports
the count and rate).

The million-frame run has ACLs on (`guarded=True`): everything is allowed (no ACL on groups,
ALLOW ALL on every topic) except creating and deleting topics. Otherwise hostile CreateTopics of up
to 10,000 partitions each pile up, and every Metadata answer then lists them all: served as Kafka
serves it, but the run would measure that instead of the server's handling of hostile frames. It
also puts the authorization checks under hostile input."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from bench.fuzz_wire import fuzz
from tests.support.metrics import scrape
from tests.support.server import ServerProcess, wait_until

pytestmark = pytest.mark.interop

BUGS = ("handler_failed", "core_handler_failed", "Traceback", '"level": "critical"')
BAD_FRAME_REASONS = ("invalid_frame", "frame_too_large", "unknown_api_key", "unsupported_version",
                     "malformed_request", "unauthenticated_request")


def read_by_server(metrics: dict[str, float]) -> int:
    """Frames the server read: requests it answered plus connections it closed for a bad frame."""
    answered = sum(v for k, v in metrics.items() if k.startswith("coordinator_requests_total{"))
    refused = sum(v for k, v in metrics.items() if k.startswith("coordinator_connections_closed_total{")
                  and any(f'reason="{r}"' in k for r in BAD_FRAME_REASONS))
    return int(answered + refused)


GUARD_ACLS = [  # (resource type, name, operation, permission): see the module docstring
    (2, "*", 2, 3),  # TOPIC * ALL ALLOW
    (2, "*", 5, 2),  # TOPIC * CREATE DENY
    (2, "*", 6, 2),  # TOPIC * DELETE DENY
    (4, "kafka-cluster", 5, 2),  # CLUSTER CREATE DENY (and, with an ACL there, the rest of the cluster)
]


@contextlib.contextmanager
def fuzz_server(directory: Path, guarded: bool = False) -> Iterator[ServerProcess]:
    overrides = {"log.flush.policy": "none", "history.enable": "false", "topics": "orders:2,t0:1",
                 "connections.max.idle.ms": "5000"}
    if guarded:
        overrides.update({"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                          "allow.everyone.if.no.acl.found": "true"})
    server = ServerProcess(directory / "data", overrides=overrides)
    server.start()
    try:
        if guarded:
            asyncio.run(_create_acls(server.port))
        yield server
    finally:
        server.stop()


async def _create_acls(port: int) -> None:
    from protocol.build import build
    from protocol.schemas import request_schema
    from tests.support.wire import WireClient

    client = await WireClient.connect(port)
    try:
        response = await client.request(build(request_schema(30, 3), {"creations": [
            {"resource_type": rtype, "resource_name": name, "resource_pattern_type": 3, "principal": "User:*",
             "host": "*", "operation": op, "permission_type": permission}
            for rtype, name, op, permission in GUARD_ACLS]}))
        assert [r.error_code for r in response.results] == [0] * len(GUARD_ACLS)
    finally:
        await client.close()


def check_after(server: ServerProcess) -> dict[str, Any]:
    """The server survived: alive, no handler exception logged, and a group still forms and commits."""
    assert server.proc is not None and server.proc.poll() is None, f"the server died:\n{server.log()[-5000:]}"
    log = server.log()
    found = [line for line in log.splitlines() if any(bug in line for bug in BUGS)]
    assert not found, "a handler raised under fuzzing:\n" + "\n".join(found[:5])
    metrics = scrape(server.metrics_port)
    closed = {k: v for k, v in metrics.items() if k.startswith("coordinator_connections_closed_total")}
    config = {"bootstrap.servers": server.bootstrap}
    topic = "orders"  # declared at start-up (a guarded run may not create topics)
    producer = Producer(config)
    producer.produce(topic, b"still here")
    assert producer.flush(15) == 0
    consumer = Consumer({**config, "group.id": f"after-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        message = wait_until(lambda: (m := consumer.poll(0.2)) is not None and not m.error()
                             and m.value() == b"still here" and m, 30, message="a group after the fuzzing")
        consumer.commit(message, asynchronous=False)
        committed = consumer.committed([TopicPartition(topic, message.partition())], timeout=10)
        assert committed[0].offset == message.offset() + 1
    finally:
        consumer.close()
    return {"server_alive": True, "connections_closed": {k.split("reason=")[-1].strip('"}'): v
                                                         for k, v in closed.items()}}


def fuzz_until(directory: Path, frames: int, seed: int = 17, connections: int = 4,
               guarded: bool = False) -> dict[str, Any]:
    """Fuzz a fresh server until it has read `frames` frames; then check it (`check_after`)."""
    with fuzz_server(directory, guarded) as server:
        totals: dict[str, Any] = {}
        read = round_ = 0
        while read < frames:
            report = asyncio.run(fuzz("127.0.0.1", server.port, max(frames - read, 1000), seed + round_, connections))
            for key, value in report.as_dict().items():
                totals[key] = totals.get(key, 0) + value if key not in ("apis", "frames_per_second") else max(
                    totals.get(key, 0), value)
            read = read_by_server(scrape(server.metrics_port)) - totals["probes"]
            round_ += 1
        totals["read_by_server"] = read
        totals["read_per_second"] = round(read / totals["seconds"])
        totals.pop("frames_per_second")
        return {**totals, **check_after(server)}


def _run(tmp_path: Path, frames: int, guarded: bool = False) -> dict[str, Any]:
    result = fuzz_until(tmp_path, frames, guarded=guarded)
    print(json.dumps(result))
    assert result["read_by_server"] >= frames and result["structured"] and result["mutated"] and result["junk"]
    assert result["closed_by_server"] > 0  # the junk did close connections, as it must
    return result


def test_5000_hostile_frames_leave_the_server_serving(tmp_path) -> None:
    result = _run(tmp_path, 5_000)
    assert result["apis"] >= 20  # every API family was hit


@pytest.mark.slow
def test_a_million_hostile_frames_leave_the_server_serving(tmp_path) -> None:
    _run(tmp_path, 1_000_000, guarded=True)
