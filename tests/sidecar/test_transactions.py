"""Exactly-once consume-transform-produce through the sidecar, with Apache Kafka 4.0 upstream: the
transactions are the upstream's, the group is the sidecar's, TxnOffsetCommit is validated here
(KIP-447) and forwarded, and the group's offsets are read back from the upstream, where the
transaction markers decide them. Processors: confluent-kafka (`eos_processor.py`) and the Java
client 4.3.0 (`java/EosProcessor.java`, compiled with javac; skipped with the reason when the
clients or a JDK are missing)."""

from __future__ import annotations

import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from protocol.build import build
from protocol.errors import ErrorCode
from protocol.schemas import request_schema
from tests.support.metrics import scrape
from tests.support.server import ServerProcess, free_port, wait_until

from .conftest import Upstream, free_base_port, sidecar_process
from .support import high_watermarks, metadata_addresses, produce_keyed
from .test_routing import api_ranges, call

pytestmark = pytest.mark.interop

RECORDS = 300
FAST = {"group.consumer.heartbeat.interval.ms": "500", "group.consumer.min.heartbeat.interval.ms": "500",
        # A SIGKILLed KIP-848 member holds its partitions until its session expires.
        "group.consumer.session.timeout.ms": "6000", "group.consumer.min.session.timeout.ms": "6000"}


class Processor:
    """`tests/sidecar/eos_processor.py` as a child process, its stdout lines kept."""

    def __init__(self, bootstrap: str, source: str, sink: str, group: str, transactional_id: str, protocol: str,
                 *extra: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.sidecar.eos_processor", bootstrap, source, sink, group, transactional_id,
             protocol, *extra], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._queue.put(line.strip())
        self._queue.put(None)

    def wait_for_line(self, prefix: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no {prefix!r} within {timeout}s: {self.lines[-5:]}") from None
            if line is None:
                raise AssertionError(f"processor exited ({self.proc.wait(5)}) before {prefix!r}: {self.lines[-5:]}")
            self.lines.append(line)
            if line.startswith(prefix):
                return line

    def finish(self, timeout: float = 90.0) -> int:
        self.wait_for_line("DONE", timeout)
        return self.proc.wait(10)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self._reader.join(10)  # the pipe ends with the process
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def read_committed(bootstrap: str, topic: str, timeout: float = 60.0) -> list[bytes]:
    """Every committed record of `topic` (read_committed, by assignment), read up to the end."""
    ends = high_watermarks(bootstrap, topic)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "eos-reader-unused", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    try:
        consumer.assign([TopicPartition(topic, p, -2) for p in ends])
        values: list[bytes] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            values += [m.value() for m in consumer.consume(1000, 0.3) if not m.error()]
            positions = consumer.position([TopicPartition(topic, p) for p in ends])
            if all(tp.offset >= ends[tp.partition] for tp in positions):
                return values
        raise AssertionError(f"read_committed did not reach the end {ends} within {timeout}s")
    finally:
        consumer.close()


def assert_exactly_once(bootstrap: str, sink: str, count: int) -> None:
    outputs = Counter(read_committed(bootstrap, sink))
    expected = Counter(b"out:%d" % i for i in range(count))
    duplicated = {v: n for v, n in outputs.items() if n > 1}
    assert not duplicated, f"{len(duplicated)} outputs more than once, e.g. {list(duplicated.items())[:3]}"
    assert outputs == expected, f"missing {sorted(expected - outputs)[:5]}, unexpected {sorted(outputs - expected)[:5]}"


def fetched(bootstrap: str, group: str, topic: str, partitions: int, require_stable: bool = False) -> dict[int, int]:
    """The group's committed offsets as `bootstrap` answers OffsetFetch (raises on a group error)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    asked = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])
    result = admin.list_consumer_group_offsets([asked], require_stable=require_stable)[group].result(timeout=30)
    errors = {tp.partition: tp.error for tp in result.topic_partitions if tp.error is not None}
    if errors:
        raise KafkaException(next(iter(errors.values())))
    return {tp.partition: tp.offset for tp in result.topic_partitions if tp.offset >= 0}


@pytest.fixture
def sidecar(tmp_path: Path, kafka_upstream: Upstream):
    server = sidecar_process(tmp_path / "sidecar", kafka_upstream.bootstrap, free_base_port(), **FAST).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize("protocol", ["consumer", pytest.param("classic", marks=pytest.mark.slow)])
def test_exactly_once_across_a_processor_killed_mid_transaction(sidecar: ServerProcess, kafka_upstream: Upstream,
                                                                 protocol: str) -> None:
    source, sink, group = f"eos-in-{protocol}", f"eos-out-{protocol}", f"eos-{protocol}"
    produce_keyed(kafka_upstream.bootstrap, source, RECORDS)
    first = Processor(sidecar.bootstrap, source, sink, group, f"eos-tx-{protocol}", protocol,
                      "--hang-after", "2", "--batch", "40")
    try:
        first.wait_for_line("MID")
        # Two transactions committed offsets; the third's are pending upstream.
        through_sidecar = fetched(sidecar.bootstrap, group, source, 3)
        assert through_sidecar == fetched(kafka_upstream.bootstrap, group, source, 3)
        assert 0 < sum(through_sidecar.values()) < RECORDS
        with pytest.raises(KafkaException) as unstable:
            fetched(sidecar.bootstrap, group, source, 3, require_stable=True)
        assert unstable.value.args[0].code() == KafkaError.UNSTABLE_OFFSET_COMMIT
    finally:
        first.kill()
    # The next owner of the transactional id fences the dead one, whose transaction is aborted:
    # its output never visible, its offsets never fetched (else records would be skipped).
    second = Processor(sidecar.bootstrap, source, sink, group, f"eos-tx-{protocol}", protocol)
    try:
        assert second.finish() == 0
    finally:
        second.kill()
    assert fetched(sidecar.bootstrap, group, source, 3, require_stable=True) == high_watermarks(
        kafka_upstream.bootstrap, source)
    assert_exactly_once(kafka_upstream.bootstrap, sink, RECORDS)
    assert "offsets_home_upstream" in sidecar.log()


def run_to_end(bootstrap: str, source: str, sink: str, group: str, transactional_id: str, protocol: str,
               attempts: int = 3) -> list[str]:
    """Run processors one after the other until one reaches the input's end (an application
    restarts its processor after a fatal error); their output lines."""
    lines: list[str] = []
    for _ in range(attempts):
        processor = Processor(bootstrap, source, sink, group, transactional_id, protocol, "--batch", "20")
        try:
            processor.finish(timeout=120)
            return lines + processor.lines
        except AssertionError:
            lines += processor.lines
        finally:
            processor.kill()
    raise AssertionError(f"no processor finished: {lines[-8:]}")


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_exactly_once_across_a_sigkill_of_the_sidecar_with_a_standby(tmp_path: Path, kafka_upstream: Upstream,
                                                                      protocol: str) -> None:
    """The active sidecar is SIGKILLed while a processor commits transaction after transaction;
    the standby on the same data directory takes over its ports, knows from the log that the
    group's offsets live upstream, and the output still holds every input once."""
    source, sink, group = f"failover-in-{protocol}", f"failover-out-{protocol}", f"failover-{protocol}"
    records = 2000
    produce_keyed(kafka_upstream.bootstrap, source, records)
    base, port = free_base_port(), free_port()
    active = sidecar_process(tmp_path / "sidecar", kafka_upstream.bootstrap, base, port=port, **FAST).start()
    standby = sidecar_process(tmp_path / "sidecar", kafka_upstream.bootstrap, base, port=port, **FAST)
    standby.log_path = tmp_path / "standby.log"
    standby.start(wait=False)
    processor = Processor(active.bootstrap, source, sink, group, f"failover-tx-{protocol}", protocol,
                          "--batch", "20")
    try:
        wait_until(lambda: "standby_waiting" in standby.log(), message="the standby to be tailing")
        processor.wait_for_line("COMMITTED 5")
        active.kill()
        wait_until(standby.ready, timeout=30, interval=0.05, message="standby takeover")
        try:
            processor.finish(timeout=120)
            lines = processor.lines
        except AssertionError:  # a fatal error in the outage: the application starts it again
            processor.kill()
            lines = processor.lines + run_to_end(standby.bootstrap, source, sink, group, f"failover-tx-{protocol}",
                                                 protocol)
        assert any(line.startswith("COMMITTED") for line in lines[lines.index("COMMITTED 5 20") + 1:]), lines[-5:]
        assert_exactly_once(kafka_upstream.bootstrap, sink, records)
        assert fetched(standby.bootstrap, group, source, 3, require_stable=True) == high_watermarks(
            kafka_upstream.bootstrap, source)
    finally:
        processor.kill()
        active.stop()
        standby.stop()


def joined(consumer: Consumer, timeout: float = 30.0) -> None:
    wait_until(lambda: bool(consumer.poll(0.1) or True) and bool(consumer.assignment()), timeout=timeout,
               message="an assignment")


def test_a_zombie_of_an_old_generation_is_fenced(sidecar: ServerProcess, kafka_upstream: Upstream) -> None:
    """KIP-447: the producer sends the group metadata of the consumer it works for; once a
    rebalance moved the group on, metadata of the old generation is refused here, and nothing
    reaches the upstream."""
    source, group = "zombie-in", "zombie-group"
    produce_keyed(kafka_upstream.bootstrap, source, 30)
    config = {"bootstrap.servers": sidecar.bootstrap, "group.id": group, "group.protocol": "classic",
              "session.timeout.ms": 6000, "heartbeat.interval.ms": 200, "auto.offset.reset": "earliest",
              "enable.auto.commit": False}
    old, other = Consumer(config), Consumer(config)
    producer = Producer({"bootstrap.servers": sidecar.bootstrap, "transactional.id": "zombie-tx"})
    try:
        old.subscribe([source])
        joined(old)
        stale = old.consumer_group_metadata()
        other.subscribe([source])
        wait_until(lambda: bool(old.poll(0.05) or True) and bool(other.poll(0.05) or True)
                   and bool(other.assignment()) and bool(old.assignment()), timeout=30, message="a second generation")
        producer.init_transactions(30)
        producer.begin_transaction()
        with pytest.raises(KafkaException) as refused:
            producer.send_offsets_to_transaction([TopicPartition(source, 0, 7)], stale, 30)
        assert refused.value.args[0].code() == KafkaError.ILLEGAL_GENERATION
        producer.abort_transaction(30)
        # The member's current metadata is accepted, and the offset becomes visible on commit.
        producer.begin_transaction()
        producer.send_offsets_to_transaction([TopicPartition(source, 0, 9)], old.consumer_group_metadata(), 30)
        producer.commit_transaction(30)
        assert fetched(sidecar.bootstrap, group, source, 1) == {0: 9}
        for client in (producer, old):  # the transaction went through the sidecar's listeners only
            assert not metadata_addresses(client) & kafka_upstream.addresses
    finally:
        old.close()
        other.close()


def test_a_departed_kip848_member_cannot_commit_transactionally(sidecar: ServerProcess,
                                                                kafka_upstream: Upstream) -> None:
    source, group = "departed-in", "departed-group"
    produce_keyed(kafka_upstream.bootstrap, source, 10)
    consumer = Consumer({"bootstrap.servers": sidecar.bootstrap, "group.id": group, "group.protocol": "consumer",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    producer = Producer({"bootstrap.servers": sidecar.bootstrap, "transactional.id": "departed-tx"})
    consumer.subscribe([source])
    joined(consumer)
    departed = consumer.consumer_group_metadata()
    consumer.close()
    producer.init_transactions(30)
    producer.begin_transaction()
    with pytest.raises(KafkaException) as refused:
        producer.send_offsets_to_transaction([TopicPartition(source, 0, 3)], departed, 30)
    assert refused.value.args[0].code() == KafkaError.UNKNOWN_MEMBER_ID
    producer.abort_transaction(30)
    assert fetched(sidecar.bootstrap, group, source, 3) == {}


def test_an_aborted_transactions_offsets_are_never_fetched(sidecar: ServerProcess, kafka_upstream: Upstream) -> None:
    source, group = "abort-in", "abort-group"
    produce_keyed(kafka_upstream.bootstrap, source, 30)
    consumer = Consumer({"bootstrap.servers": sidecar.bootstrap, "group.id": group, "group.protocol": "consumer",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    producer = Producer({"bootstrap.servers": sidecar.bootstrap, "transactional.id": "abort-tx"})
    try:
        consumer.subscribe([source])
        joined(consumer)
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.send_offsets_to_transaction([TopicPartition(source, 1, 4)], consumer.consumer_group_metadata(), 30)
        producer.commit_transaction(30)
        producer.begin_transaction()
        producer.send_offsets_to_transaction([TopicPartition(source, 1, 20)], consumer.consumer_group_metadata(), 30)
        assert fetched(sidecar.bootstrap, group, source, 3) == {1: 4}  # pending: not visible
        producer.abort_transaction(30)
        assert fetched(sidecar.bootstrap, group, source, 3, require_stable=True) == {1: 4}
        # A consumer restarting from the group's offsets starts at 4, not at the aborted 20.
        consumer.close()
        consumer = Consumer({"bootstrap.servers": sidecar.bootstrap, "group.id": group, "group.protocol": "consumer",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe([source])
        first: dict[int, int] = {}

        def read_partition_1() -> bool:
            for m in consumer.consume(100, 0.2):
                if not m.error():
                    first.setdefault(m.partition(), m.offset())
            return 1 in first

        wait_until(read_partition_1, timeout=30, message="partition 1 read")
        assert first[1] == 4
    finally:
        consumer.close()


def clients_dir() -> Path:
    """`KAFKA_JAVA_CLIENTS`, else `clients-4.3.0` beside the broker distribution `KAFKA_HOME` names."""
    named = os.environ.get("KAFKA_JAVA_CLIENTS")
    if named:
        return Path(named)
    home = os.environ.get("KAFKA_HOME")
    return Path(home).parent / "clients-4.3.0" if home else Path("clients-4.3.0-not-found")
JAVA_SOURCE = Path(__file__).parent / "java" / "EosProcessor.java"


@pytest.fixture(scope="module")
def java_processor(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The command that runs the compiled processor (the class files in a temporary directory)."""
    clients = clients_dir()
    jars = sorted(clients.glob("*.jar"))
    if not any(j.name.startswith("kafka-clients-") for j in jars):
        pytest.skip(f"no kafka-clients jar in {clients} (set KAFKA_JAVA_CLIENTS or KAFKA_HOME)")
    if shutil.which("javac") is None or shutil.which("java") is None:
        pytest.skip("no javac/java on PATH")
    out = tmp_path_factory.mktemp("java-eos")
    classpath = ":".join(str(j) for j in jars)
    subprocess.run(["javac", "-cp", classpath, "-d", str(out), str(JAVA_SOURCE)], check=True, timeout=120)
    return ["java", "-Xmx256m", "-cp", f"{classpath}:{out}", "EosProcessor"]


@pytest.mark.parametrize("protocol", ["classic", pytest.param("consumer", marks=pytest.mark.slow)])
def test_java_send_offsets_to_transaction_through_the_sidecar(java_processor: list[str], sidecar: ServerProcess,
                                                              kafka_upstream: Upstream, protocol: str) -> None:
    source, sink, group = f"java-eos-in-{protocol}", f"java-eos-out-{protocol}", f"java-eos-{protocol}"
    produce_keyed(kafka_upstream.bootstrap, source, RECORDS)
    run = subprocess.run([*java_processor, sidecar.bootstrap, source, sink, group, f"java-eos-tx-{protocol}",
                          protocol], capture_output=True, text=True, timeout=150)
    lines = run.stdout.splitlines()
    assert run.returncode == 0, (lines[-5:], run.stderr[-2000:])
    assert lines[-1].startswith("DONE ") and int(lines[-1].split()[1]) >= 1
    assert_exactly_once(kafka_upstream.bootstrap, sink, RECORDS)
    assert fetched(sidecar.bootstrap, group, source, 3, require_stable=True) == high_watermarks(
        kafka_upstream.bootstrap, source)


def test_the_upstream_stays_the_groups_home_across_a_restart(tmp_path: Path, kafka_upstream: Upstream) -> None:
    """Offsets committed here before the group's first transactional commit are copied upstream;
    after a restart the group's OffsetFetch is still answered from upstream (the mark is a record
    in the log), a plain commit is committed upstream before it is answered, and mirror rounds
    never put the older offsets kept here over the transaction's."""
    source, group = "home-in", "home-group"
    produce_keyed(kafka_upstream.bootstrap, source, 30)
    base, port = free_base_port(), free_port()
    server = sidecar_process(tmp_path / "sidecar", kafka_upstream.bootstrap, base, port=port, **FAST).start()
    outsider = {"bootstrap.servers": server.bootstrap, "group.id": group, "enable.auto.commit": False}
    try:
        committer = Consumer(outsider)  # never subscribes: simple commits (generation -1)
        committer.commit(offsets=[TopicPartition(source, 0, 3), TopicPartition(source, 2, 2)], asynchronous=False)
        committer.close()
        producer = Producer({"bootstrap.servers": server.bootstrap, "transactional.id": "home-tx"})
        producer.init_transactions(30)
        producer.begin_transaction()
        metadata = Consumer(outsider)
        producer.send_offsets_to_transaction([TopicPartition(source, 0, 9)], metadata.consumer_group_metadata(), 30)
        metadata.close()
        producer.commit_transaction(30)
        assert fetched(kafka_upstream.bootstrap, group, source, 3) == {0: 9, 2: 2}  # 2: copied before the forward
        server.stop()
        server = sidecar_process(tmp_path / "sidecar", kafka_upstream.bootstrap, base, port=port, **FAST).start()
        assert fetched(server.bootstrap, group, source, 3) == {0: 9, 2: 2}  # here, 0 is still 3
        committer = Consumer(outsider)
        committer.commit(offsets=[TopicPartition(source, 1, 5)], asynchronous=False)
        committer.close()
        assert fetched(kafka_upstream.bootstrap, group, source, 3) == {0: 9, 1: 5, 2: 2}
        wait_until(lambda: scrape(server.metrics_port)["coordinator_sidecar_offset_mirror_pending_groups"] == 0,
                   message="a mirror round over the group")
        assert fetched(kafka_upstream.bootstrap, group, source, 3) == {0: 9, 1: 5, 2: 2}
        assert "offset_import_refused" not in server.log()
    finally:
        server.stop()


def test_api_versions_offer_txn_offset_commit_as_far_as_the_upstream_does(sidecar: ServerProcess,
                                                                          kafka_upstream: Upstream) -> None:
    ours, theirs = api_ranges(sidecar.port), api_ranges(int(kafka_upstream.bootstrap.rsplit(":", 1)[1]))
    assert ours[28] == (0, min(theirs[28][1], 5))
    for key in (22, 24, 25, 26):  # InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn: forwarded
        assert ours[key] == theirs[key]


def test_a_producer_epoch_that_went_backwards_gets_the_upstreams_answer(sidecar: ServerProcess,
                                                                       kafka_upstream: Upstream) -> None:
    """Raw requests: the producer's checks are the upstream's, and its refusal is passed through;
    the refused offset is never visible."""
    produce_keyed(kafka_upstream.bootstrap, "epoch-in", 10)
    txn = "epoch-tx"
    found: list[Any] = []

    def located() -> bool:  # the upstream creates its transaction log on first use: retriable meanwhile
        found.append(call(sidecar.port, build(request_schema(10, 3), {"key": txn, "key_type": 1})))
        return found[-1].error_code == 0

    wait_until(located, timeout=30, interval=0.1, message="the transaction coordinator")
    coordinator = int(found[-1].port)
    assert f"{found[-1].host}:{coordinator}" not in kafka_upstream.addresses  # our listener for that broker

    def init() -> tuple[int, int]:
        answers: list[Any] = []

        def answered() -> bool:  # CONCURRENT_TRANSACTIONS or loading: Kafka asks clients to retry
            answers.append(call(coordinator, build(request_schema(22, 4), {
                "transactional_id": txn, "transaction_timeout": 60000, "producer_id": -1, "producer_epoch": -1})))
            return answers[-1].error_code == 0

        wait_until(answered, timeout=30, interval=0.1, message="InitProducerId")
        return int(answers[-1].producer_id), int(answers[-1].producer_epoch)

    producer_id, old_epoch = init()
    _, epoch = init()
    assert epoch == old_epoch + 1
    added = call(coordinator, build(request_schema(25, 3), {
        "transactional_id": txn, "producer_id": producer_id, "producer_epoch": epoch, "group_id": "epoch-group"}))
    assert added.error_code == 0

    def commit_old_epoch() -> list[int]:
        answer = call(sidecar.port, build(request_schema(28, 3), {
            "transactional_id": txn, "group_id": "epoch-group", "producer_id": producer_id,
            "producer_epoch": old_epoch, "generation_id": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": "epoch-in", "partitions": [{"partition_index": 0, "committed_offset": 7,
                                                            "committed_leader_epoch": -1, "committed_metadata": ""}]}]}))
        return [int(p.error_code) for t in answer.topics for p in t.partitions]

    codes: list[list[int]] = []

    def answered_by_the_upstream() -> bool:  # at first the topic may not be in the sidecar's catalog yet
        codes.append(commit_old_epoch())
        return codes[-1] != [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]

    wait_until(answered_by_the_upstream, message="the topic in the sidecar's catalog")
    assert codes[-1] in ([ErrorCode.INVALID_PRODUCER_EPOCH], [ErrorCode.PRODUCER_FENCED]), codes
    call(coordinator, build(request_schema(26, 3), {
        "transactional_id": txn, "producer_id": producer_id, "producer_epoch": epoch, "committed": False}))
    assert fetched(sidecar.bootstrap, "epoch-group", "epoch-in", 3) == {}


@pytest.mark.slow
def test_a_transaction_that_times_out_upstream_never_shows_its_offsets(sidecar: ServerProcess,
                                                                       kafka_upstream: Upstream) -> None:
    """The upstream aborts a transaction past its timeout (checked every 10 s by default): its
    offsets are never fetched, and the producer's late commit fails."""
    source, group = "timeout-in", "timeout-group"
    produce_keyed(kafka_upstream.bootstrap, source, 30)
    metadata_of = Consumer({"bootstrap.servers": sidecar.bootstrap, "group.id": group})
    producer = Producer({"bootstrap.servers": sidecar.bootstrap, "transactional.id": "timeout-tx",
                         "transaction.timeout.ms": 2000})
    try:
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.send_offsets_to_transaction([TopicPartition(source, 0, 4)], metadata_of.consumer_group_metadata(), 30)
        producer.commit_transaction(30)
        producer.begin_transaction()
        producer.send_offsets_to_transaction([TopicPartition(source, 0, 20)], metadata_of.consumer_group_metadata(), 30)
        answers: list[dict[int, int]] = []

        def stable() -> bool:
            try:
                answers.append(fetched(sidecar.bootstrap, group, source, 3, require_stable=True))
            except KafkaException as exc:
                assert exc.args[0].code() == KafkaError.UNSTABLE_OFFSET_COMMIT
                assert fetched(sidecar.bootstrap, group, source, 3) == {0: 4}  # pending: never shown
                return False
            return True

        wait_until(stable, timeout=40, interval=0.5, message="the upstream to abort the timed-out transaction")
        assert answers[-1] == {0: 4}
        with pytest.raises(KafkaException):
            producer.commit_transaction(30)
        assert fetched(sidecar.bootstrap, group, source, 3, require_stable=True) == {0: 4}
    finally:
        metadata_of.close()


def test_offset_fetch_of_upstream_groups_at_every_client_version(sidecar: ServerProcess,
                                                                 kafka_upstream: Upstream) -> None:
    """Raw OffsetFetch: v10 names topics by id (Kafka 4.0 upstream speaks up to v9, so the sidecar
    asks it by name and answers by id), a batch mixes a group answered upstream with one answered
    here, and v1 (no group error, no RequireStable) still works."""
    source = "versions-in"
    produce_keyed(kafka_upstream.bootstrap, source, 10)
    outsider = {"bootstrap.servers": sidecar.bootstrap, "group.id": "versions-home", "enable.auto.commit": False}
    producer = Producer({"bootstrap.servers": sidecar.bootstrap, "transactional.id": "versions-tx"})
    metadata_of = Consumer(outsider)
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.send_offsets_to_transaction([TopicPartition(source, 0, 9)], metadata_of.consumer_group_metadata(), 30)
    producer.commit_transaction(30)
    metadata_of.close()
    local = Consumer({**outsider, "group.id": "versions-local"})
    local.commit(offsets=[TopicPartition(source, 1, 4)], asynchronous=False)
    local.close()
    described = call(sidecar.port, build(request_schema(3, 12), {
        "topics": [{"topic_id": None, "name": source}], "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False}))
    topic_id = described.topics[0].topic_id
    by_id = call(sidecar.port, build(request_schema(9, 10), {"require_stable": True, "groups": [
        {"group_id": "versions-home", "member_id": None, "member_epoch": -1,
         "topics": [{"topic_id": topic_id, "partition_indexes": [0, 1]}]},
        {"group_id": "versions-local", "member_id": None, "member_epoch": -1, "topics": None}]}))
    answered = {g.group_id: {(t.topic_id, p.partition_index): (int(p.committed_offset), int(p.error_code))
                             for t in g.topics for p in t.partitions} for g in by_id.groups}
    assert answered == {"versions-home": {(topic_id, 0): (9, 0), (topic_id, 1): (-1, 0)},
                        "versions-local": {(topic_id, 1): (4, 0)}}
    old = call(sidecar.port, build(request_schema(9, 1), {
        "group_id": "versions-home", "topics": [{"name": source, "partition_indexes": [0]}]}))
    assert [(int(p.committed_offset), int(p.error_code)) for t in old.topics for p in t.partitions] == [(9, 0)]
    # A plain commit by topic id (v10) of a group whose offsets live upstream is committed there too.
    committed = call(sidecar.port, build(request_schema(8, 10), {
        "group_id": "versions-home", "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
        "topics": [{"topic_id": topic_id, "partitions": [
            {"partition_index": 1, "committed_offset": 6, "committed_leader_epoch": -1, "committed_metadata": ""}]}]}))
    assert [int(p.error_code) for t in committed.topics for p in t.partitions] == [0]
    assert fetched(kafka_upstream.bootstrap, "versions-home", source, 3) == {0: 9, 1: 6}
