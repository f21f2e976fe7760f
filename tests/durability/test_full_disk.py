"""A full disk under a running server: Produce gets KAFKA_STORAGE_ERROR, group writes get
NOT_COORDINATOR (Kafka's answer when a coordinator's append fails with a storage error), reads keep
working, the process keeps running without a traceback, and once space is freed everything that
was acknowledged is still there after a restart.

The data directory is a small tmpfs mounted for the test (root only: skipped where mounting is not
permitted) and filled with a file; a real confluent-kafka producer and consumer talk to the server,
and group writes go as raw OffsetCommit requests, whose error code is the point.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from protocol.errors import ErrorCode
from tests.support.server import ServerProcess, http_get, wait_until
from tests.support.wire import call, request

pytestmark = pytest.mark.interop

TOPIC = "events"
GROUP = "g"
OFFSET_COMMIT, OFFSET_FETCH, CREATE_TOPICS, INIT_PRODUCER_ID = 8, 9, 19, 22
DISK_BYTES = 48 * 1024 * 1024  # the Python server's own files are small; room for the test's data
BIG = 16 * 1024
"""A write this big needs new pages of the tmpfs, whatever room the last page of its file has."""


@contextlib.contextmanager
def small_disk(mount_point: Path) -> Iterator[Path]:
    """A tmpfs of DISK_BYTES at `mount_point`, unmounted afterwards whatever happens."""
    mount_point.mkdir()
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES}", "tmpfs", str(mount_point)],
                       check=True, capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        pytest.skip(f"cannot mount a tmpfs here ({exc} {detail.decode(errors='replace').strip()})")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False, capture_output=True, timeout=30)


def fill(path: Path) -> None:
    """Write `path` until the filesystem has no byte left."""
    chunk = b"\0" * (1024 * 1024)
    with open(path, "wb", buffering=0) as filler:
        while True:
            try:
                filler.write(chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                break
        for size in (65536, 4096, 512, 1):  # the last partial block too
            with contextlib.suppress(OSError):
                while True:
                    filler.write(b"\0" * size)


def produce(bootstrap: str, values: list[bytes]) -> list[KafkaError | None]:
    """Each value's delivery error (None: acknowledged), with no retries: the first answer counts."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "retries": 0,
                         "enable.idempotence": False, "message.timeout.ms": 15000,
                         "partitioner": "consistent"})
    errors: dict[int, KafkaError | None] = {}
    for i, value in enumerate(values):
        producer.produce(TOPIC, value, partition=0,
                         on_delivery=lambda err, _msg, i=i: errors.__setitem__(i, err))
    assert producer.flush(30) == 0
    return [errors[i] for i in range(len(values))]


def read_back(bootstrap: str, end: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        values: list[bytes] = []
        wait_until(lambda: _poll_into(consumer, values) >= end, timeout=20, message=f"{end} messages")
        return values
    finally:
        consumer.close()


def _poll_into(consumer: Consumer, values: list[bytes]) -> int:
    message = consumer.poll(0.2)
    if message is not None and message.error() is None:
        values.append(bytes(message.value()))
    return len(values)


def commit(port: int, offset: int, metadata: str = "") -> int:
    req = request(OFFSET_COMMIT, 8, group_id=GROUP, generation_id_or_member_epoch=-1, member_id="",
                  group_instance_id=None, retention_time_ms=-1,
                  topics=[{"name": TOPIC, "partitions": [{"partition_index": 0, "committed_offset": offset,
                                                          "committed_leader_epoch": -1,
                                                          "committed_metadata": metadata}]}])
    response: Any = asyncio.run(call(port, req))
    return int(response.topics[0].partitions[0].error_code)


def committed(port: int) -> int:
    req = request(OFFSET_FETCH, 8, groups=[{"group_id": GROUP, "topics": [{"name": TOPIC, "partition_indexes": [0]}]}],
                  require_stable=False)
    response: Any = asyncio.run(call(port, req))
    group = response.groups[0]
    assert group.error_code == 0
    return int(group.topics[0].partitions[0].committed_offset)


def create_topic(port: int, name: str) -> int:
    topic = {"name": name, "num_partitions": 1, "replication_factor": -1, "assignments": [], "configs": []}
    response: Any = asyncio.run(call(port, request(CREATE_TOPICS, 7, topics=[topic], timeout=5000)))
    return int(response.topics[0].error_code)


def init_producer_id(port: int) -> int:
    response: Any = asyncio.run(call(port, request(INIT_PRODUCER_ID, 4, transactional_id=None,
                                                   transaction_timeout_ms=-1, producer_id=-1, producer_epoch=-1)))
    return int(response.error_code)


def log_lines(server: ServerProcess) -> list[dict[str, Any]]:
    return [json.loads(line) for line in server.log().splitlines() if line.startswith("{")]


def test_a_full_disk_answers_kafka_errors_keeps_reads_and_loses_nothing_acknowledged(tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk") as disk:
        server = ServerProcess(disk / "data", overrides={"topics": f"{TOPIC}:1",
                                                              "offset.metadata.max.bytes": str(2 * BIG)})
        try:
            server.start()
            acknowledged = [b"before-%d" % i for i in range(20)]
            assert produce(server.bootstrap, acknowledged) == [None] * 20
            assert commit(server.port, 5) == ErrorCode.NONE

            fill(disk / "filler")
            first_refusal = time.monotonic()
            refused = produce(server.bootstrap, [b"r" * BIG])
            assert refused[0] is not None and refused[0].code() == KafkaError.KAFKA_STORAGE_ERROR
            assert commit(server.port, 7, "m" * BIG) == ErrorCode.NOT_COORDINATOR
            # The other files a client's request writes: the topic catalog, the producer id block.
            assert create_topic(server.port, "new") == ErrorCode.KAFKA_STORAGE_ERROR
            assert init_producer_id(server.port) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS  # retriable
            # Reads go on: Fetch serves every acknowledged message, OffsetFetch the last commit
            # that was written (once the shard has reloaded: until then it answers, retriably,
            # COORDINATOR_LOAD_IN_PROGRESS).
            assert read_back(server.bootstrap, 20) == acknowledged
            assert wait_until(lambda: _committed_or_none(server.port), timeout=10, message="OffsetFetch") == 5
            for _ in range(5):  # a disk that stays full keeps refusing, quietly
                assert produce(server.bootstrap, [b"r" * BIG])[0].code() == KafkaError.KAFKA_STORAGE_ERROR  # type: ignore[union-attr]
            assert server.proc is not None and server.proc.poll() is None
            assert http_get(server.metrics_port, "/readyz")[0] == 200
            lines = log_lines(server)
            assert "Traceback" not in server.log()
            refusals = [line for line in lines if line["event"] == "produce_write_refused"]
            # Six refusals, one line per kind per 10 s (more only if this machine made the test slow).
            allowed = 1 + int((time.monotonic() - first_refusal) // 10)
            assert 1 <= len(refusals) <= allowed and {line["kind"] for line in refusals} == {"ENOSPC"}
            assert [line["kind"] for line in lines if line["event"] == "group_log_write_refused"] == ["ENOSPC"]

            os.remove(disk / "filler")
            assert produce(server.bootstrap, [b"after"]) == [None]
            assert create_topic(server.port, "new") == ErrorCode.NONE  # the refused one was taken back
            assert init_producer_id(server.port) == ErrorCode.NONE
            assert wait_until(lambda: _commit_when_loaded(server.port, 21), timeout=10, message="commit") == 1
            assert server.terminate() == 0

            server.start()  # everything acknowledged, and nothing refused, after a restart
            assert read_back(server.bootstrap, 21) == [*acknowledged, b"after"]
            assert committed(server.port) == 21
        finally:
            server.stop()


def _committed_or_none(port: int) -> int | None:
    try:
        return committed(port)
    except AssertionError:  # COORDINATOR_LOAD_IN_PROGRESS while the shard reloads
        return None


def _commit_when_loaded(port: int, offset: int) -> int:
    code = commit(port, offset)
    assert code in (ErrorCode.NONE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR)
    return 1 if code == ErrorCode.NONE else 0
