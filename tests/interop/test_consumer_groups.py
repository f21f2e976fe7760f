"""KIP-848 consumer groups (`group.protocol=consumer`) formed by real confluent-kafka (librdkafka)
consumers against the real server process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.clients import Member, owns_each_exactly_once, poll_until, produce
from tests.support.server import ServerProcess, wait_until

pytestmark = pytest.mark.interop

TOPIC = "events"
PARTITIONS = 6
# Short timers so the test is quick: librdkafka adopts the server's heartbeat interval.
FAST = {
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.heartbeat.interval.ms": "100",
    "group.consumer.session.timeout.ms": "4000",
    "group.consumer.min.session.timeout.ms": "1000",
}
CONSUMER = {"group.protocol": "consumer"}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    process = ServerProcess(tmp_path / "data", overrides={"topics": f"{TOPIC}:{PARTITIONS}", **FAST})
    process.start()
    try:
        yield process
    finally:
        process.stop()


def consumer_member(server: ServerProcess, group: str, name: str, topics: list[str]) -> Member:
    """A librdkafka consumer with `group.protocol=consumer` (session and heartbeat settings are the
    broker's with this protocol: librdkafka refuses client-side ones)."""
    member = Member(name, Consumer({
        "bootstrap.servers": server.bootstrap, "group.id": group, "client.id": name, **CONSUMER,
        "auto.offset.reset": "earliest", "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 1000,
    }))

    def on_assign(consumer: Consumer, partitions: list[TopicPartition]) -> None:
        member.assigned_events.append({tp.partition for tp in partitions})

    def on_revoke(consumer: Consumer, partitions: list[TopicPartition]) -> None:
        member.revoked_events.append({tp.partition for tp in partitions})

    member.consumer.subscribe(topics, on_assign=on_assign, on_revoke=on_revoke)
    return member


def test_three_consumers_own_every_partition_exactly_once_and_consume(server: ServerProcess) -> None:
    members = [consumer_member(server, "g3", f"m{i}", [TOPIC]) for i in range(3)]
    try:
        # Exactly-once ownership alone can hold before the last member's share arrives (3/3/0 while the
        # first two still revoke), so the balanced state the uniform assignor promises is what is awaited.
        poll_until(members, lambda: owns_each_exactly_once(members, PARTITIONS)
                   and all(len(m.assignment()) == 2 for m in members), message="a full, balanced assignment")
        # Produced once the assignment has settled: these members commit nothing, so a message read
        # before a partition moved would legitimately be read again by its next owner.
        produce(server.bootstrap, TOPIC, 60, PARTITIONS)
        poll_until(members, lambda: sum(len(m.consumed) for m in members) >= 60, message="every message")
        consumed = sorted((p, o) for m in members for p, o, _ in m.consumed)
        assert len(consumed) == len(set(consumed)) == 60
    finally:
        for m in members:
            m.close()


def test_a_leaving_member_never_makes_the_others_revoke_what_they_keep(server: ServerProcess) -> None:
    members = [consumer_member(server, "leave", f"m{i}", [TOPIC]) for i in range(3)]
    try:
        # The balanced state, not exactly-once ownership alone: that holds mid-rebalance too (3/3/0 while
        # the first two still revoke), and a revocation still under way is not the leave's doing.
        poll_until(members, lambda: owns_each_exactly_once(members, PARTITIONS)
                   and all(len(m.assignment()) == 2 for m in members), message="a balanced three-member assignment")
        before = {m.name: m.assignment() for m in members}
        for m in members:
            m.revoked_events.clear()
        leaver, survivors = members[0], members[1:]
        leaver.close()  # a clean leave: ConsumerGroupHeartbeat with epoch -1
        poll_until(survivors, lambda: owns_each_exactly_once(survivors, PARTITIONS), message="reassignment after leave")
        for m in survivors:
            assert before[m.name] <= m.assignment(), f"{m.name} lost a partition it owned"
            assert not m.revoked(), f"{m.name} was asked to revoke {m.revoked()}"
    finally:
        for m in members:
            m.close()


def test_a_new_member_takes_partitions_only_after_they_are_revoked(server: ServerProcess) -> None:
    first = consumer_member(server, "join", "m0", [TOPIC])
    members = [first]
    try:
        poll_until(members, lambda: owns_each_exactly_once(members, PARTITIONS), message="one-member assignment")
        members.append(consumer_member(server, "join", "m1", [TOPIC]))
        seen_overlap = []

        def balanced() -> bool:
            a, b = (m.assignment() for m in members)
            if a & b:
                seen_overlap.append((a, b))
            return owns_each_exactly_once(members, PARTITIONS) and len(a) == len(b) == 3

        poll_until(members, balanced, message="two-member assignment")
        assert not seen_overlap, f"two consumers held the same partition: {seen_overlap}"
        assert first.revoked() == members[1].assignment()  # exactly what moved was revoked
    finally:
        for m in members:
            m.close()


_KILLABLE = textwrap.dedent(
    """
    import json, sys
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "client.id": "doomed",
                         "group.protocol": "consumer", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([sys.argv[3]])
    last = None
    while True:
        consumer.poll(0.05)
        owned = sorted(tp.partition for tp in consumer.assignment())
        if owned != last:
            print(json.dumps(owned), flush=True)
            last = owned
    """
)


def test_a_killed_member_loses_its_partitions_after_the_session_timeout(server: ServerProcess, tmp_path: Path) -> None:
    survivor = consumer_member(server, "kill", "survivor", [TOPIC])
    script = tmp_path / "member.py"
    script.write_text(_KILLABLE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("COORDINATOR_")}
    proc = subprocess.Popen([sys.executable, str(script), server.bootstrap, "kill", TOPIC],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        owned_by_doomed: set[int] = set()
        deadline = time.monotonic() + 30
        assert proc.stdout is not None
        while time.monotonic() < deadline:
            survivor.consumer.poll(0.05)
            line = proc.stdout.readline() if _readable(proc) else ""
            if line:
                owned_by_doomed = set(json.loads(line))
            if owned_by_doomed and owned_by_doomed.isdisjoint(survivor.assignment()) and \
                    len(owned_by_doomed | survivor.assignment()) == PARTITIONS:
                break
        else:
            raise AssertionError(f"no shared assignment: doomed {owned_by_doomed}, survivor {survivor.assignment()}")
        proc.send_signal(signal.SIGKILL)  # no leave heartbeat: only the session timeout can free them
        proc.wait(10)
        killed_at = time.monotonic()
        poll_until([survivor], lambda: survivor.assignment() == set(range(PARTITIONS)), timeout=30,
                   message="the killed member's partitions to move")
        waited = time.monotonic() - killed_at
        assert waited >= 2.5, f"partitions moved after {waited:.1f}s, before the 4 s session timeout"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()
        survivor.close()


def _readable(proc: subprocess.Popen[str]) -> bool:
    import select

    assert proc.stdout is not None
    return bool(select.select([proc.stdout], [], [], 0)[0])


def test_regex_subscription_picks_up_a_topic_created_later(server: ServerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    for future in admin.create_topics([NewTopic("pre-one", 2)]).values():
        future.result(10)
    member = consumer_member(server, "regex", "r0", ["^pre.*"])
    try:
        poll_until([member], lambda: _topics(member) == {"pre-one"}, message="the regex assignment")
        for future in admin.create_topics([NewTopic("pre-two", 3), NewTopic("other", 1)]).values():
            future.result(10)
        poll_until([member], lambda: _topics(member) == {"pre-one", "pre-two"} and len(member.consumer.assignment()) == 5,
                   message="the topic created later")
    finally:
        member.close()


def _topics(member: Member) -> set[str]:
    return {tp.topic for tp in member.consumer.assignment()}


def test_commits_carry_the_member_epoch_and_survive_a_handover(server: ServerProcess) -> None:
    produce(server.bootstrap, TOPIC, 30, PARTITIONS)
    first = consumer_member(server, "commit", "c0", [TOPIC])
    try:
        poll_until([first], lambda: len(first.consumed) >= 30, message="all messages")
        first.consumer.commit(asynchronous=False)
    finally:
        first.close()
    second = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "commit", "group.protocol": "consumer",
                       "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        second.subscribe([TOPIC])
        wait_until(lambda: second.poll(0.1) is None and len(second.assignment()) == PARTITIONS, timeout=30,
                   message="the second consumer's assignment")
        committed = second.committed(second.assignment(), timeout=10)
        assert sum(tp.offset for tp in committed) == 30
        assert second.poll(1.0) is None  # nothing is consumed twice
    finally:
        second.close()


def test_members_keep_member_id_epoch_and_partitions_across_a_coordinator_crash(tmp_path: Path) -> None:
    """kill -9 the coordinator mid-group: the restarted one replays the log and the members carry on
    with the same epochs and partitions; nobody rebalances."""
    import asyncio

    from kio.index import load_request_schema

    from protocol.build import build
    from tests.support.wire import WireClient

    def cgh(**fields: object) -> object:
        fields.setdefault("topic_partitions", None)
        return build(load_request_schema(68, 1), {"group_id": "crash", **fields})

    async def join_and_settle(port: int) -> dict[str, tuple[int, set[int]]]:
        client = await WireClient.connect(port)
        try:
            state: dict[str, tuple[int, set[int]]] = {}
            for member in ("a", "b"):
                r = await client.request(cgh(member_id=member, member_epoch=0, rebalance_timeout=60_000,
                                             subscribed_topic_names=[TOPIC], subscribed_topic_regex="",
                                             topic_partitions=[]))
                state[member] = (r.member_epoch, {p for t in r.assignment.topic_partitions for p in t.partitions})
                topic_id = r.assignment.topic_partitions[0].topic_id if r.assignment.topic_partitions else None
            for _ in range(4):
                for member, (epoch, owned) in list(state.items()):
                    parts = [{"topic_id": topic_id, "partitions": sorted(owned)}] if owned else []
                    r = await client.request(cgh(member_id=member, member_epoch=epoch, topic_partitions=parts))
                    assert r.error_code == 0, r
                    if r.assignment is not None:
                        owned = {p for t in r.assignment.topic_partitions for p in t.partitions}
                        topic_id = r.assignment.topic_partitions[0].topic_id if owned else topic_id
                    state[member] = (r.member_epoch, owned)
            return state
        finally:
            await client.close()

    async def heartbeat_after_restart(port: int, state: dict[str, tuple[int, set[int]]]) -> None:
        client = await WireClient.connect(port)
        try:
            for member, (epoch, _) in state.items():
                r = await client.request(cgh(member_id=member, member_epoch=epoch))
                assert (r.error_code, r.member_epoch, r.assignment) == (0, epoch, None), r
            described = await client.request(build(load_request_schema(69, 1),
                                                    {"group_ids": ["crash"], "include_authorized_operations": False}))
            (group,) = described.groups
            assert group.group_state == "Stable"
            assigned = {m.member_id: {p for t in m.assignment.topic_partitions for p in t.partitions}
                        for m in group.members}
            assert assigned == {member: owned for member, (_, owned) in state.items()}
        finally:
            await client.close()

    data = tmp_path / "data"
    first = ServerProcess(data, overrides={"topics": f"{TOPIC}:{PARTITIONS}"}).start()
    try:
        state = asyncio.run(join_and_settle(first.port))
        assert sorted(p for _, owned in state.values() for p in owned) == list(range(PARTITIONS))
    finally:
        first.kill()
        first.stop()
    second = ServerProcess(data, overrides={"topics": f"{TOPIC}:{PARTITIONS}"}).start()
    try:
        asyncio.run(heartbeat_after_restart(second.port, state))
    finally:
        second.stop()
