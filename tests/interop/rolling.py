"""A rolling upgrade (and downgrade) of real librdkafka consumers between the classic protocol
(cooperative-sticky) and KIP-848 (``group.protocol=consumer``), with a ledger of everything the
clients saw: every assign, revoke and lost callback, every message consumed, every commit and its
outcome.

Each consumer runs its own poll loop in its own thread, as separate processes would (a synchronous
commit waits behind its consumer's own JoinGroup on the coordinator connection, which waits for the
other members: one thread for all would stall them). The ledger takes one lock for every callback
and every recorded commit, so events are totally ordered: "at no instant do two members own one
partition" is checked as each assign happens. A member commits what it consumed before it lets a
partition go (in its revoke callback), and the coordinator hands the partition on only after that
callback returned, so the order commits are recorded in is the order they happened per partition.

The committed view: for each partition, the successful commits must never go back, and each one's
range (from the previous successful commit to it) must have been consumed by the consumer that
committed it. Then every message is in exactly one committed range: consumed exactly once as far as
the committed offsets tell.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

CLASSIC = {"partition.assignment.strategy": "cooperative-sticky", "session.timeout.ms": "6000",
           "heartbeat.interval.ms": "300"}
KIP848 = {"group.protocol": "consumer"}


@dataclass
class Incarnation:
    """One consumer process (a restart is a new incarnation of the same name)."""

    name: str
    protocol: str
    consumer: Consumer
    owned: set[int] = field(default_factory=set)
    consumed: dict[int, set[int]] = field(default_factory=lambda: defaultdict(set))
    position: dict[int, int] = field(default_factory=dict)  # partition -> next offset to commit
    committed: dict[int, int] = field(default_factory=dict)  # partition -> last offset it committed
    stopping: threading.Event = field(default_factory=threading.Event)
    closed: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None


class Ledger:
    def __init__(self, bootstrap: str, group: str, topic: str, partitions: int,
                 config: dict[str, Any] | None = None) -> None:
        """`config`: librdkafka settings added to every consumer's (e.g. `COORDINATOR_LOSS` of
        tests.support.clients when the coordinator is killed under the consumers)."""
        self.bootstrap = bootstrap
        self.config = dict(config or {})
        self.group = group
        self.topic = topic
        self.partitions = partitions
        self.lock = threading.RLock()
        self.members: list[Incarnation] = []
        self.events: list[tuple[int, str, str, tuple[int, ...]]] = []
        self.violations: list[str] = []
        self.commits: list[tuple[int, str, int, int]] = []  # (seq, incarnation, partition, offset) that succeeded
        self.commit_errors: list[tuple[str, str]] = []  # (incarnation, error name)
        self.client_errors: list[tuple[str, str]] = []  # (incarnation, error) from poll
        self.seq = 0
        self._count = 0

    # ---- consumers ---------------------------------------------------------------------------

    def start(self, name: str, protocol: str) -> Incarnation:
        self._count += 1
        settings: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap, "group.id": self.group, "client.id": f"{name}-{self._count}",
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "topic.metadata.refresh.interval.ms": 1000,
            **(CLASSIC if protocol == "classic" else KIP848), **self.config,
        }
        member = Incarnation(f"{name}#{self._count}", protocol, Consumer(settings))

        def on_assign(consumer: Consumer, partitions: list[TopicPartition]) -> None:
            got = {tp.partition for tp in partitions}
            with self.lock:
                self._note(member, "assign", got)
                for p in got:
                    for other in self.members:
                        if other is not member and p in other.owned:
                            self.violations.append(f"seq {self.seq}: {member.name} got {p} still owned by {other.name}")
                member.owned |= got

        def on_revoke(consumer: Consumer, partitions: list[TopicPartition]) -> None:
            gone = {tp.partition for tp in partitions}
            self._commit(member, gone)  # what it consumed is committed before it lets go
            with self.lock:
                self._note(member, "revoke", gone)
                member.owned -= gone

        def on_lost(consumer: Consumer, partitions: list[TopicPartition]) -> None:
            gone = {tp.partition for tp in partitions}
            with self.lock:
                self._note(member, "lost", gone)
                member.owned -= gone

        member.consumer.subscribe([self.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
        with self.lock:
            self.members.append(member)
        member.thread = threading.Thread(target=self._loop, args=(member,), name=member.name, daemon=True)
        member.thread.start()
        return member

    def stop(self, member: Incarnation, timeout: float = 30) -> None:
        """Stop the consumer as a process does on shutdown: commit, close (revoking what it owns)."""
        member.stopping.set()
        assert member.thread is not None
        member.thread.join(timeout)
        assert member.closed.is_set(), f"{member.name} did not close within {timeout}s"

    def live(self) -> list[Incarnation]:
        with self.lock:
            return [m for m in self.members if not m.closed.is_set()]

    def _note(self, member: Incarnation, kind: str, partitions: set[int]) -> None:
        self.seq += 1
        self.events.append((self.seq, member.name, kind, tuple(sorted(partitions))))

    # ---- each consumer's poll loop -----------------------------------------------------------

    def _loop(self, member: Incarnation) -> None:
        """Consume a batch, commit what it consumed of what it owns; until told to stop."""
        consumer = member.consumer
        while not member.stopping.is_set():
            for message in consumer.consume(num_messages=200, timeout=0.05):
                if message.error():
                    with self.lock:
                        self.client_errors.append((member.name, str(message.error())))
                    continue
                p, offset = message.partition(), message.offset()
                member.consumed[p].add(offset)
                member.position[p] = offset + 1
            self._commit(member, set(member.owned))
        self._commit(member, set(member.owned))
        consumer.close()  # revokes (callback) what it still owns
        with self.lock:
            if member.owned:
                self._note(member, "closed", set(member.owned))
                member.owned.clear()
            member.closed.set()

    def _commit(self, member: Incarnation, partitions: set[int]) -> None:
        due = {p: o for p, o in member.position.items() if p in partitions and member.committed.get(p) != o}
        if not due:
            return
        offsets = [TopicPartition(self.topic, p, o) for p, o in sorted(due.items())]
        try:
            results = member.consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as exc:
            error = exc.args[0]
            with self.lock:
                self.commit_errors.append((member.name, error.name() if isinstance(error, KafkaError) else str(error)))
            return
        with self.lock:
            for tp in results or ():
                if tp.error is not None:
                    self.commit_errors.append((member.name, tp.error.name()))
                    continue
                self.seq += 1
                self.commits.append((self.seq, member.name, tp.partition, tp.offset))
                member.committed[tp.partition] = tp.offset

    # ---- waiting, conditions and verdicts ----------------------------------------------------------

    def wait_for(self, condition: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while True:
            with self.lock:
                if condition():
                    return
            if time.monotonic() > deadline:
                with self.lock:
                    owned = {m.name: sorted(m.owned) for m in self.members if not m.closed.is_set()}
                    raise AssertionError(f"timed out after {timeout}s waiting for {what}; owned: {owned}; "
                                         f"commit errors: {self.commit_errors[-5:]}; client errors: "
                                         f"{self.client_errors[-5:]}")
            time.sleep(0.02)

    def balanced(self, newcomer: Incarnation | None = None) -> bool:
        """Every partition owned exactly once, by live members, every one of them owning some."""
        live = [m for m in self.members if not m.closed.is_set() and not m.stopping.is_set()]
        owned = [p for m in live for p in m.owned]
        if sorted(owned) != list(range(self.partitions)) or not all(m.owned for m in live):
            return False
        return newcomer is None or bool(newcomer.owned)

    def caught_up(self, ends: dict[int, int]) -> bool:
        committed = self.final_commits()
        return all(committed.get(p, 0) >= end for p, end in ends.items())

    def final_commits(self) -> dict[int, int]:
        out: dict[int, int] = {}
        for _, _, p, offset in self.commits:
            out[p] = offset
        return out

    def committed_view_errors(self, ends: dict[int, int]) -> list[str]:
        """Where the successful commits do not tile every partition exactly once."""
        errors = []
        consumed = {m.name: m.consumed for m in self.members}
        previous: dict[int, int] = {}
        for seq, name, p, offset in self.commits:
            start = previous.get(p, 0)
            if offset < start:
                errors.append(f"seq {seq}: {name} committed {p}@{offset} after {p}@{start} (went back)")
                continue
            missing = set(range(start, offset)) - consumed[name][p]
            if missing:
                errors.append(f"seq {seq}: {name} committed {p}@{offset} without consuming {sorted(missing)[:5]}")
            previous[p] = offset
        for p, end in ends.items():
            if previous.get(p, 0) != end:
                errors.append(f"partition {p}: committed {previous.get(p, 0)}, end {end}")
        return errors


class SteadyProducer:
    """Writes keyed messages round-robin over the partitions until stopped."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, per_second: int = 200) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self.topic = topic
        self.partitions = partitions
        self.interval = 1.0 / per_second
        self.sent = 0
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="steady-producer", daemon=True)

    def start(self) -> SteadyProducer:
        self._thread.start()
        return self

    def _delivered(self, error: KafkaError | None, message: Any) -> None:
        if error is not None:
            self.failed.append(error.name())

    def _run(self) -> None:
        while not self._stop.is_set():
            self.producer.produce(self.topic, key=str(self.sent).encode(), value=b"v",
                                  partition=self.sent % self.partitions, on_delivery=self._delivered)
            self.sent += 1
            self.producer.poll(0)
            self._stop.wait(self.interval)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        assert self.producer.flush(30) == 0


def group_type(bootstrap: str, group: str) -> str:
    """``classic`` or ``consumer``, as ListGroups v5 says."""
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the answer is in
    listed = admin.list_consumer_groups().result(10)
    (listing,) = [g for g in listed.valid if g.group_id == group]
    return str(listing.type.name).lower()


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe"})
    try:
        return {p: probe.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
    finally:
        probe.close()
