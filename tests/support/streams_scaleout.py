"""The scale-out of issue 29 point 3, shared by its test (`tests/interop/test_streams_scaleout.py`)
and its benchmark (`bench/streams_scaleout.py`): two instances of the Kafka Streams counting app
(`tests/interop/java/StreamsCountApp.java`, trunk client, StreamsGroupHeartbeat v1) count a store
of 200,000 distinct keys in six tasks, a third instance joins while records keep coming, and two
stateful tasks move to it: with warm-ups on the newcomer restores them as warm-ups while their
owners keep processing, with warm-ups off it restores them as active tasks, processing stopped.

The coordinator runs embedded (topics declared by `server_settings`) or in sidecar mode in front of
Apache Kafka (`run(..., upstream=...)`: the records and counts live on Kafka, in topics of the run's
own, since the broker is shared; the group is the sidecar's).

`run` drives the scenario against a running coordinator and returns what the instances' logs say
(`ScaleOut`): which tasks moved, each moved task's processing gap (the last record its old owner
processed to the first its new owner processed), the longest gap of the tasks that stayed (the
baseline), and what the newcomer restored (active restoration, warm-up updating). The app prints
those facts itself (PROCESSED / RESTORED / STANDBY_END lines, see the app's header); timing is
measured, never asserted here."""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Producer

from tests.support.server import ServerProcess, wait_until
from tests.support.streams_app import APP_SOURCE, DEFAULT_TOPICS, Counts, Instance, Topics

__all__ = ["ACCEPTABLE_RECOVERY_LAG", "APP_SOURCE", "STORE_KEYS", "ScaleOut", "run", "server_settings"]

STORE_KEYS = 200_000
PARTITIONS = 6
ACCEPTABLE_RECOVERY_LAG = 2_000
"""Records: a task's store is ~33,000, so a newcomer lags far above this until its warm-up restored."""
TICK_RATE = 300
"""Records per second produced (keys of the store, round robin) while the group scales out, so that
every task has something to process and a stop shows as a gap."""


def server_settings(warmups: bool, sidecar: bool = False) -> dict[str, str]:
    """The coordinator's settings: fast rebalances, task offsets every second, warm-ups on (Kafka's
    default budget, 2) or off (0, which Kafka's config definition allows: `atLeast(0)`). Embedded,
    it declares the topics; a sidecar's topics are Kafka's (`run` creates them there)."""
    settings = {
        "group.streams.heartbeat.interval.ms": "500",
        "group.streams.session.timeout.ms": "6000",
        "group.streams.task.offset.interval.ms": "1000",
        "group.streams.acceptable.recovery.lag": str(ACCEPTABLE_RECOVERY_LAG),
        "group.streams.num.warmup.replicas": "2" if warmups else "0",
    }
    if not sidecar:
        settings["topics"] = f"{DEFAULT_TOPICS.words}:{PARTITIONS},{DEFAULT_TOPICS.counts}:{PARTITIONS}"
    return settings


@dataclass
class AppLog:
    """The measurement lines of one instance's log."""

    processed: dict[str, list[int]] = field(default_factory=dict)
    """Task -> epoch ms at which it processed a record (at most every 50 ms, and its last)."""
    restored: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Task -> (records, ms) of its last active restoration."""
    standby_ended: dict[str, tuple[int, str]] = field(default_factory=dict)
    """Task -> (records loaded, reason) of its last standby (warm-up) updating: PROMOTED or MIGRATED."""

    @classmethod
    def read(cls, path: Path) -> AppLog:
        log = cls()
        for line in path.read_text(errors="replace").splitlines():
            parts = line.split()
            if line.startswith("PROCESSED ") and len(parts) == 3:
                log.processed.setdefault(parts[1], []).append(int(parts[2]))
            elif line.startswith("RESTORED ") and len(parts) == 5:
                log.restored[f"0_{parts[1]}"] = (int(parts[3]), int(parts[4]))
            elif line.startswith("STANDBY_END ") and len(parts) == 5:
                log.standby_ended[f"0_{parts[1]}"] = (int(parts[3]), parts[4])
        return log


@dataclass
class MovedTask:
    task: str
    gap_ms: int
    """From the last record its old owner processed to the first the newcomer processed."""
    warmed_up: bool
    """The newcomer ran it as a standby (a warm-up: no standby replicas are configured) before it ran it active."""
    restored_records: int
    """Records the newcomer's active restoration of it restored (0: nothing left to restore)."""
    restore_ms: int
    warmup_records: int
    """Records its warm-up loaded before the hand-over (0 without a warm-up)."""
    store_share: int
    """Its share of the store's keys (an even split; the partitioner's hash varies it by ~1%)."""


@dataclass
class ScaleOut:
    warmups: bool
    moved: list[MovedTask]
    baseline_gap_ms: int
    """The longest processing gap among the tasks that stayed, from the join to the end."""
    settle_s: float
    """From the third instance's start until it processed every task it was given."""
    duplicated: int
    """Keys counted more often than produced (at least once allows it; none counted less: `run`
    waits for that)."""


def produce_store(bootstrap: str, keys: int, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 10_000})
    for i in range(keys):
        while True:
            try:
                producer.produce(topic, key=f"key-{i}", value=b"x")
                break
            except BufferError:
                producer.poll(0.05)
        if i % 5_000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0


class Ticker:
    """Produces keys of the store round robin at TICK_RATE until stopped; counts what it sent."""

    def __init__(self, bootstrap: str, keys: int, topic: str) -> None:
        self.sent: dict[str, int] = {}
        self._keys = keys
        self._topic = topic
        self._producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        started = time.monotonic()
        n = 0
        while not self._stop.is_set():
            due = int((time.monotonic() - started) * TICK_RATE)
            while n < due:
                key = f"key-{(n * 7919) % self._keys}"  # a stride: consecutive ticks land on different partitions
                self._producer.produce(self._topic, key=key, value=b"x")
                self.sent[key] = self.sent.get(key, 0) + 1
                n += 1
            self._producer.poll(0)
            self._stop.wait(0.01)  # pacing the load, not waiting for a condition

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        assert self._producer.flush(30) == 0


def balanced(instances: list[Instance], active: int) -> bool:
    """Every instance runs `active` active tasks and no standby (no warm-up left)."""
    return all(len(i.tasks_now()[0]) == active and not i.tasks_now()[1] for i in instances)


def run(app: tuple[Path, Path], server: ServerProcess, workdir: Path, warmups: bool,
        store_keys: int = STORE_KEYS, upstream: str | None = None) -> ScaleOut:
    """Two instances count `store_keys` keys, a third joins under a steady trickle of records.
    With `upstream` (the Kafka cluster a sidecar `server` fronts) the records go to Kafka, in topics
    created for this run; the instances talk to the sidecar."""
    bootstrap = server.bootstrap
    data = upstream or bootstrap
    topics = DEFAULT_TOPICS
    if upstream is not None:
        topics = Topics.unique(PARTITIONS)
        topics.create(upstream)
    app_id = f"scaleout-{uuid.uuid4().hex[:8]}"
    counts = Counts(data, topics)
    first = [Instance(app, bootstrap, app_id, name, workdir, topics) for name in ("a", "b")]
    instances = list(first)
    ticker: Ticker | None = None
    try:
        # Warm-ups on, a task "b" warms up while "a" keeps it is handed over by lag once records
        # flow: over an empty changelog the trunk client reports the warm-up's end offset as
        # Long.MAX_VALUE (unknown), and the move only goes ahead once it stalls (two report
        # periods, README). So produce, then wait: the first split is the caught-up hand-over.
        produce_store(data, store_keys, topics.words)
        wait_until(lambda: len(counts.read()) == store_keys, 300, 0.1, "the store counted")
        wait_until(lambda: balanced(first, 3), 120, 0.1, "a and b run 3 tasks each, no warm-up left")
        ticker = Ticker(data, store_keys, topics.words)
        joined_ms = int(time.time() * 1000)
        newcomer = Instance(app, bootstrap, app_id, "c", workdir, topics)
        instances.append(newcomer)

        def settled() -> bool:
            if not balanced(instances, 2):
                return False
            processed = AppLog.read(newcomer.log).processed
            return all(task in processed for task in newcomer.tasks_now()[0])

        wait_until(settled, 300, 0.1, "c runs 2 tasks and processed them")
        settle_s = time.time() - joined_ms / 1000
        moved_tasks = sorted(newcomer.tasks_now()[0])
        lines = newcomer.task_lines()
        ticker.stop()
        ended_ms = int(time.time() * 1000)
        expected = {f"key-{i}": 1 for i in range(store_keys)}
        for key, n in ticker.sent.items():
            expected[key] += n
        ticker = None

        def counted() -> bool:
            latest = counts.read()
            return all(latest.get(key, 0) >= n for key, n in expected.items())

        wait_until(counted, 120, 0.1, "every key counted at least as often as it was produced")
        latest = counts.read()
        duplicated = sum(1 for key, n in expected.items() if latest.get(key, 0) > n)
    finally:
        if ticker is not None:
            ticker.stop()
        for instance in reversed(instances):
            instance.stop()
        counts.close()

    logs = {i.log.stem: AppLog.read(i.log) for i in instances}
    new_log = logs["c"]
    moved = []
    for task in moved_tasks:
        last_old = max(t for name in ("a", "b") for t in logs[name].processed.get(task, []))
        became_active = next(n for n, (active, _) in enumerate(lines) if task in active)
        records, ms = new_log.restored.get(task, (0, 0))
        warmup_records, reason = new_log.standby_ended.get(task, (0, ""))
        moved.append(MovedTask(
            task, min(new_log.processed[task]) - last_old,
            any(task in standby for _, standby in lines[:became_active]) and reason == "PROMOTED",
            records, ms, warmup_records, store_keys // PARTITIONS))
    stayed: dict[str, list[int]] = {}  # a task's PROCESSED times on either first instance
    for name in ("a", "b"):
        for task, times in logs[name].processed.items():
            if task not in moved_tasks:
                stayed.setdefault(task, []).extend(times)
    baseline = max(_longest_gap(times, joined_ms, ended_ms) for times in stayed.values())
    return ScaleOut(warmups, moved, baseline, settle_s, duplicated)


def _longest_gap(times: list[int], start_ms: int, end_ms: int) -> int:
    """The longest stretch within [start, end] without a PROCESSED line."""
    inside = sorted(t for t in times if start_ms <= t <= end_ms)
    points = [start_ms, *inside, end_ms]
    return max(b - a for a, b in itertools.pairwise(points))
