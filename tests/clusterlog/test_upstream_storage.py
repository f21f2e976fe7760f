"""A sidecar keeping its record log on the Apache Kafka 4.0 it fronts (`coordinator.log.storage=upstream`,
issue 27 point 2): nothing of a group lives in the instance's data directory, so an instance
SIGKILLed and started again on a fresh, empty directory serves the same groups: KIP-848 members keep
their ids, epochs and partitions, and committed offsets are fetched back.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.offset_commit.v8.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kio.static.primitive import i32, i64

from protocol.errors import ErrorCode
from tests.durability.test_failover import (
    FAST,
    PARTITIONS,
    TOPIC,
    assert_members_kept_everything,
    consumers,
    settle,
)
from tests.sidecar.conftest import free_base_port, sidecar_process
from tests.support.kafka import KafkaBroker
from tests.support.server import ServerProcess, free_port, wait_until
from tests.support.wire import WireClient

pytestmark = pytest.mark.interop

LOG_PARTITIONS = 5


def upstream_instance(data_dir: Path, broker: KafkaBroker, topic: str, base: int, port: int,
                      **overrides: str) -> ServerProcess:
    return sidecar_process(data_dir, broker.bootstrap, base, port=port, **{
        **FAST, "coordinator.log.storage": "upstream", "coordinator.log.topic": topic,
        "coordinator.log.group.id": f"{topic}-instances", "coordinator.log.session.timeout.ms": "6000",
        "offsets.topic.num.partitions": str(LOG_PARTITIONS), **overrides})


def ensure_topic(broker: KafkaBroker, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    if name in admin.list_topics(timeout=30).topics:
        return
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])[name].result(30)


def commit_offsets(bootstrap: str, group: str, offsets: dict[int, int]) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in offsets.items()], asynchronous=False)
    finally:
        consumer.close()


def fetch_offsets(bootstrap: str, group: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        found = consumer.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=30)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in found if tp.offset >= 0}


def events(server: ServerProcess) -> list[dict[str, object]]:
    return [json.loads(line) for line in server.log().splitlines() if line.startswith("{")]


def test_groups_and_offsets_survive_sigkill_and_a_fresh_data_directory(tmp_path: Path,
                                                                       kafka_broker: KafkaBroker) -> None:
    ensure_topic(kafka_broker, TOPIC, PARTITIONS)
    log_topic = f"coordinator-log-{uuid.uuid4().hex[:8]}"
    base, port = free_base_port(), free_port()
    first = upstream_instance(tmp_path / "first", kafka_broker, log_topic, base, port).start(wait=False)
    first.wait_ready(60)
    members = consumers(first.bootstrap)
    second: ServerProcess | None = None
    try:
        commit_offsets(first.bootstrap, "classic-offsets", {0: 17, 3: 42})
        before = settle(members, first.port)
        assert first.proc is not None
        first.proc.kill()
        first.proc.wait(10)
        # Same addresses, nothing of the first instance's directory.
        # Tailing off: this load reads every partition from its start.
        second = upstream_instance(tmp_path / "second", kafka_broker, log_topic, base, port,
                                   **{"coordinator.log.tail.interval.ms": "0"})
        second.start(wait=False)
        second.wait_ready(60)
        assert not any((tmp_path / "second" / "log").glob("*.log")), "the log is upstream, not local"
        # (Both instances log to one file: the last load is the second instance's.)
        loaded = [e for e in events(second) if e["event"] == "cluster_log_loaded"]
        assert loaded[-1]["partitions"] == LOG_PARTITIONS and int(str(loaded[-1]["records"])) > 0
        assert loaded[-1]["read"] == loaded[-1]["records"]
        assert_members_kept_everything(members, before, second)
        assert fetch_offsets(second.bootstrap, "classic-offsets") == {0: 17, 3: 42}
    finally:
        for m in members:
            m.close()
        if second is not None:
            second.stop()
        first.stop()


def test_a_log_topic_of_another_partition_count_is_refused_in_one_line(tmp_path: Path,
                                                                      kafka_broker: KafkaBroker) -> None:
    log_topic = f"coordinator-log-{uuid.uuid4().hex[:8]}"
    ensure_topic(kafka_broker, log_topic, LOG_PARTITIONS + 1)
    server = upstream_instance(tmp_path / "data", kafka_broker, log_topic, free_base_port(), free_port())
    server.start(wait=False)
    try:
        assert server.proc is not None
        assert server.proc.wait(60) == 2
        wait_until(lambda: "offsets.topic.num.partitions" in server.log(), message="the refusal")
        refusal = [line for line in server.log().splitlines() if "partitions" in line and "Traceback" not in line]
        assert "Traceback" not in server.log()
        assert any(f"has {LOG_PARTITIONS + 1} partitions" in line for line in refusal), server.log()
    finally:
        server.stop()


def test_upstream_storage_is_refused_in_embedded_mode(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "data", overrides={"coordinator.log.storage": "upstream"})
    server.start(wait=False)
    try:
        assert server.proc is not None
        assert server.proc.wait(30) == 2
        text = server.log()
        assert "coordinator.log.storage" in text and "upstream.bootstrap.servers" in text
        assert "Traceback" not in text
    finally:
        server.stop()


async def _commit(port: int, group: str, offsets: dict[int, int]) -> list[int]:
    client = await WireClient.connect(port)
    try:
        response = await client.request(OffsetCommitRequest(
            group_id=group, generation_id_or_member_epoch=i32(-1), member_id="", group_instance_id=None,
            topics=(OffsetCommitRequestTopic(name=TOPIC, partitions=tuple(
                OffsetCommitRequestPartition(partition_index=i32(p), committed_offset=i64(o),
                                             committed_leader_epoch=i32(-1), committed_metadata="")
                for p, o in offsets.items())),)), timeout=60)
    finally:
        await client.close()
    return [int(p.error_code) for t in response.topics for p in t.partitions]


def commit_raw(port: int, group: str, offsets: dict[int, int]) -> list[int]:
    """An OffsetCommit of a group without members, straight to one instance; its error codes."""
    return asyncio.run(_commit(port, group, offsets))


@pytest.mark.slow
def test_an_upstream_lost_mid_write_acknowledges_nothing_and_service_resumes_when_it_returns(
        tmp_path: Path, kafka_broker: KafkaBroker) -> None:
    ensure_topic(kafka_broker, TOPIC, PARTITIONS)
    log_topic = f"coordinator-log-{uuid.uuid4().hex[:8]}"
    server = upstream_instance(tmp_path / "data", kafka_broker, log_topic, free_base_port(), free_port(),
                               **{"coordinator.log.write.timeout.ms": "2000"})
    server.start(wait=False)
    try:
        server.wait_ready(60)
        assert commit_raw(server.port, "survivor", {0: 1}) == [0]
        kafka_broker.stop()
        try:
            started = time.monotonic()
            codes = commit_raw(server.port, "survivor", {1: 2})
            waited = time.monotonic() - started
            # Waited for the write (COORDINATOR_NOT_AVAILABLE), or refused at once once the lease
            # ran out (NOT_COORDINATOR): retriable either way, never acknowledged.
            assert codes in ([ErrorCode.COORDINATOR_NOT_AVAILABLE], [ErrorCode.NOT_COORDINATOR]), codes
            print(f"answered {ErrorCode(codes[0]).name} after {waited:.2f}s")
        finally:
            kafka_broker.start()
        wait_until(lambda: commit_raw(server.port, "survivor", {2: 3}) == [0], timeout=90,
                   message="commits acknowledged again once the upstream is back")
        committed = fetch_offsets(server.bootstrap, "survivor")
        assert committed[0] == 1 and committed[2] == 3, committed
        assert "Traceback" not in server.log()
    finally:
        server.stop()


def test_a_second_instance_with_the_same_node_id_stops_with_one_line(tmp_path: Path,
                                                                     kafka_broker: KafkaBroker) -> None:
    ensure_topic(kafka_broker, TOPIC, PARTITIONS)
    log_topic = f"coordinator-log-{uuid.uuid4().hex[:8]}"
    first = upstream_instance(tmp_path / "first", kafka_broker, log_topic, free_base_port(), free_port(),
                              **{"sidecar.node.id": "1001"})
    twin = upstream_instance(tmp_path / "twin", kafka_broker, log_topic, free_base_port(), free_port(),
                             **{"sidecar.node.id": "1001"})
    try:
        first.start(wait=False)
        first.wait_ready(60)
        twin.start(wait=False)
        assert twin.proc is not None
        assert twin.proc.wait(60) == 2
        assert "node id 1001 is already used" in twin.log() and "Traceback" not in twin.log()
        assert commit_raw(first.port, "still-served", {0: 7}) == [0]  # the first one keeps serving
        assert first.ready()
    finally:
        twin.stop()
        first.stop()


def test_an_upstream_without_transactions_is_refused_in_one_line_naming_them(tmp_path: Path) -> None:
    # This project's embedded mode is a cluster without transactions: its InitProducerId refuses
    # a transactional id.
    upstream = ServerProcess(tmp_path / "upstream", overrides={"node.id": "1"}).start()
    server = sidecar_process(tmp_path / "data", upstream.bootstrap, free_base_port(), port=free_port(), **{
        "coordinator.log.storage": "upstream", "offsets.topic.num.partitions": str(LOG_PARTITIONS)})
    server.start(wait=False)
    try:
        assert server.proc is not None
        assert server.proc.wait(60) == 2
        text = server.log()
        assert "Traceback" not in text
        refusal = next(line for line in text.splitlines() if "cannot start" in line)
        assert "transactions" in refusal, refusal
    finally:
        server.stop()
        upstream.stop()


def test_acls_with_the_log_upstream_are_refused_in_one_line(tmp_path: Path) -> None:
    # ACLs are coordinator-wide records, known to one instance only with the log upstream.
    server = sidecar_process(tmp_path / "data", "127.0.0.1:1", free_base_port(), port=free_port(), **{
        "coordinator.log.storage": "upstream",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"})
    server.start(wait=False)
    try:
        assert server.proc is not None
        assert server.proc.wait(30) == 2
        text = server.log()
        assert "does not support authorizer.class.name" in text and "Traceback" not in text
    finally:
        server.stop()
