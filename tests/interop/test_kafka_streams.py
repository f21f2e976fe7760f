"""The real Kafka Streams 4.3.0 client (`group.protocol=streams`, StreamsGroupHeartbeat v0) against
the embedded coordinator: a stateful counting app (`tests/support/streams_app.py`: a persistent
store with its changelog, at-least-once) whose counts must come out exact, with one instance and with
three instances across a SIGKILL of one of them and a restart of the coordinator. The changelog topic is created by the coordinator
as the heartbeat asks; Produce/Fetch/ListOffsets/OffsetCommit are the embedded data plane's."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.java import require_streams_clients, require_trunk_clients
from tests.support.server import ServerProcess, wait_until
from tests.support.streams_app import (
    PARTITIONS,
    Counts,
    Instance,
    all_committed,
    compile_app,
    produce_distinct_keys,
    produce_words,
    warmed_up_first,
)

SERVER_SETTINGS = {
    "group.streams.heartbeat.interval.ms": "500",  # rebalances in about half a second, not five
    "group.streams.session.timeout.ms": "6000",  # a killed instance's tasks move after 6 s
    "topics": f"words:{PARTITIONS},counts:{PARTITIONS}",
}


@pytest.fixture(scope="module")
def app_classes(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return compile_app(require_streams_clients(), tmp_path_factory.mktemp("streams-app"))


@pytest.fixture(scope="module")
def trunk_app_classes(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return compile_app(require_trunk_clients(), tmp_path_factory.mktemp("streams-app-trunk"))


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    process = ServerProcess(tmp_path / "data", overrides=SERVER_SETTINGS)
    process.start()
    try:
        yield process
    finally:
        process.stop()


WARMUP_SETTINGS = {
    **SERVER_SETTINGS,
    "group.streams.acceptable.recovery.lag": "100",  # each task's store is ~2,000 records: a newcomer lags
    "group.streams.task.offset.interval.ms": "1000",
}


@pytest.fixture
def warmup_server(tmp_path: Path) -> Iterator[ServerProcess]:
    process = ServerProcess(tmp_path / "data", overrides=WARMUP_SETTINGS)
    process.start()
    try:
        yield process
    finally:
        process.stop()


def test_one_instance_counts_every_key_exactly(app_classes: tuple[Path, Path], server: ServerProcess,
                                               tmp_path: Path) -> None:
    produce_words(server.bootstrap, per_key=10)
    counts = Counts(server.bootstrap)
    app = Instance(app_classes, server.bootstrap, f"count-{uuid.uuid4().hex[:8]}", "one", tmp_path)
    try:
        wait_until(lambda: counts.all_at(10), 60, message=f"counts at 10 (app: {app.states()})")
        assert set(counts.read().values()) == {10}
        assert "RUNNING" in app.states()
    finally:
        app.stop()
        counts.close()


@pytest.mark.slow
def test_three_instances_count_exactly_across_a_sigkill_and_a_coordinator_restart(app_classes: tuple[Path, Path], server: ServerProcess,
                                                        tmp_path: Path) -> None:
    app_id = f"count-{uuid.uuid4().hex[:8]}"
    produce_words(server.bootstrap, per_key=10)
    counts = Counts(server.bootstrap)
    instances = [Instance(app_classes, server.bootstrap, app_id, f"i{n}", tmp_path) for n in range(3)]
    try:
        wait_until(lambda: all(i.running() for i in instances) and counts.all_at(10), 90,
                   message=f"three instances running, counts at 10: {[i.states() for i in instances]}")
        wait_until(lambda: all_committed(server.bootstrap, app_id), 30, message="offsets committed")
        assert set(counts.read().values()) == {10}

        instances[1].kill()
        produce_words(server.bootstrap, per_key=10)
        # The survivors take the killed instance's tasks once its session times out, restore their
        # stores from the changelog and count on: every key exactly 20 (nothing lost, nothing twice,
        # because everything before the kill was committed).
        wait_until(lambda: counts.all_at(20), 90, message=f"counts at 20: {[i.states() for i in instances]}")
        wait_until(lambda: all_committed(server.bootstrap, app_id), 30, message="offsets committed")
        assert set(counts.read().values()) == {20}

        # The coordinator restarts (SIGTERM, same port and data): the group is replayed from its
        # log, the two survivors heartbeat on against it and keep counting.
        assert server.terminate() == 0
        server.start()
        produce_words(server.bootstrap, per_key=10)
        wait_until(lambda: counts.all_at(30), 90, message=f"counts at 30: {[i.states() for i in instances]}")
        assert set(counts.read().values()) == {30}
    finally:
        for instance in instances:
            instance.stop()
        counts.close()


STORE_KEYS = 12_000  # ~2,000 per task: far above the acceptable recovery lag of 100


def scale_out(app: tuple[Path, Path], server: ServerProcess, tmp_path: Path) -> tuple[Instance, Instance, Counts]:
    """One instance counts a store of STORE_KEYS keys, then a second one joins and takes its half."""
    app_id = f"scale-{uuid.uuid4().hex[:8]}"
    produce_distinct_keys(server.bootstrap, STORE_KEYS)
    counts = Counts(server.bootstrap)
    first = Instance(app, server.bootstrap, app_id, "first", tmp_path)
    wait_until(lambda: counts.all_at(1, STORE_KEYS), 90, message=f"first counted: {first.states()}")
    second = Instance(app, server.bootstrap, app_id, "second", tmp_path)
    wait_until(lambda: len(first.tasks_now()[0]) == 3 and len(second.tasks_now()[0]) == 3
               and not second.tasks_now()[1], 90,
               message=f"balanced: first {first.task_lines()}, second {second.task_lines()}")
    return first, second, counts


@pytest.mark.slow
def test_trunk_client_on_v1_gets_warmups_that_are_promoted_once_caught_up(
        trunk_app_classes: tuple[Path, Path], warmup_server: ServerProcess, tmp_path: Path) -> None:
    first, second, counts = scale_out(trunk_app_classes, warmup_server, tmp_path)
    try:
        # No standby replicas are configured: every standby the newcomer ran was a warm-up. Each
        # task it runs now it first ran as a warm-up, while the first instance kept it active.
        moved = second.tasks_now()[0]
        assert warmed_up_first(second) == set(), second.task_lines()
        assert len(moved) == 3 and moved.isdisjoint(first.tasks_now()[0])
        assert set(counts.read().values()) == {1}
    finally:
        second.stop()
        first.stop()
        counts.close()


# Two report periods (the task-offset interval, 1 s, and the heartbeat interval, 0.5 s): how long a
# warm-up whose lag never comes down (unknown over an empty changelog) waits before its move goes ahead.
STALL_BOUND_S = 2 * 1.0


@pytest.mark.slow
def test_trunk_client_warm_up_over_an_empty_changelog_ends_active_on_the_newcomer(
        trunk_app_classes: tuple[Path, Path], warmup_server: ServerProcess, tmp_path: Path) -> None:
    """Nothing was ever counted, so every store's changelog is empty: the trunk client reports the
    newcomer's warm-ups with end offset Long.MAX_VALUE (unknown) and the owner reports nothing. The
    moves stall and go ahead within a few stall bounds (two warm-ups at a time, then the third),
    not when some record arrives; and the app counts on afterwards."""
    app_id = f"empty-{uuid.uuid4().hex[:8]}"
    first = Instance(trunk_app_classes, warmup_server.bootstrap, app_id, "first", tmp_path)
    second: Instance | None = None
    counts = Counts(warmup_server.bootstrap)
    try:
        wait_until(lambda: len(first.tasks_now()[0]) == PARTITIONS, 90, message=f"first runs all: {first.states()}")
        second = Instance(trunk_app_classes, warmup_server.bootstrap, app_id, "second", tmp_path)
        joined = second
        wait_until(lambda: bool(joined.task_lines()), 60, message=f"second joined: {joined.states()}")
        started = time.monotonic()
        wait_until(lambda: len(first.tasks_now()[0]) == 3 and len(joined.tasks_now()[0]) == 3
                   and not joined.tasks_now()[1], 60,
                   message=f"balanced: first {first.task_lines()}, second {joined.task_lines()}")
        handed_over = time.monotonic() - started
        print(f"empty changelogs: the newcomer runs its 3 tasks {handed_over:.1f} s after joining")
        assert handed_over < 10 * STALL_BOUND_S + 10  # two rounds of stalled moves and rebalances, not 120 s
        assert any(standby for _, standby in joined.task_lines())  # they were warm-ups first (no standbys set)
        produce_words(warmup_server.bootstrap, per_key=2)
        wait_until(lambda: counts.all_at(2), 60, message=f"counts at 2: {counts.read()}")
        assert set(counts.read().values()) == {2}
    finally:
        if second is not None:
            second.stop()
        first.stop()
        counts.close()


@pytest.mark.slow
def test_the_4_3_client_on_v0_gets_its_tasks_at_once_without_warmups(
        app_classes: tuple[Path, Path], warmup_server: ServerProcess, tmp_path: Path) -> None:
    first, second, counts = scale_out(app_classes, warmup_server, tmp_path)
    try:
        assert all(not standby for _, standby in second.task_lines())  # v0 reports no offsets: no warm-up
        assert set(counts.read().values()) == {1}
    finally:
        second.stop()
        first.stop()
        counts.close()
