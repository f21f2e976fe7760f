"""Online migration between the classic and the consumer protocol (``group.consumer.migration.policy``),
through the core: upgrade on the first ConsumerGroupHeartbeat, classic members served inside the
consumer group, downgrade when the last consumer-protocol member goes; the refusals; timers; a
restart mid-migration. The harness checks after every step that a replay of the log equals the
live state, the ownership invariants, and that no partition is in two members' latest answers."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pytest

from coordinator.core.classic.group import ClassicGroup
from coordinator.core.config import ConsumerGroupMigrationPolicy, GroupConfig
from coordinator.core.consumer.group import ConsumerGroup
from coordinator.core.consumer.member import MemberState
from coordinator.core.consumer_protocol import (
    decode_assignment,
    encode_subscription,
    write_assignment,
)
from coordinator.core.errors import ErrorCode
from coordinator.core.events import MemberFenced
from coordinator.core.records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMetadataKey,
    GroupMetadataKey,
)
from coordinator.core.requests import LeavingMember
from tests.core.consumer.harness import CONSUMER, ConsumerHarness
from tests.support.loading import loaded

E = ErrorCode
OK = ErrorCode.NONE
PROTOCOL = "cooperative-sticky"


def config(policy: ConsumerGroupMigrationPolicy = ConsumerGroupMigrationPolicy.BIDIRECTIONAL, **kwargs: Any) -> GroupConfig:
    kwargs.setdefault("group_initial_rebalance_delay_ms", 0)
    return GroupConfig(
        consumer_group_assignors=CONSUMER.consumer_group_assignors, consumer_group_migration_policy=policy, **kwargs
    )


class Mixed(ConsumerHarness):
    """The consumer harness plus classic clients that speak the real embedded consumer protocol."""

    def subscription(self, owned: Mapping[str, Iterable[int]] | None = None, version: int = 1) -> bytes:
        return encode_subscription(["foo"], version, None, owned or {})

    def classic_join(self, member_id: str = "", owned: Mapping[str, Iterable[int]] | None = None,
                     group_id: str = "g", **kwargs: Any) -> Any:
        kwargs.setdefault("protocols", ((PROTOCOL, self.subscription(owned)),))
        return self.reply(self.join(group_id, member_id, **kwargs))

    def classic_member(self, owned: Mapping[str, Iterable[int]] | None = None, **kwargs: Any) -> Any:
        """A new dynamic classic member (KIP-394: the second join carries the id it was given)."""
        first = self.classic_join("", owned, **kwargs)
        assert first.error_code == E.MEMBER_ID_REQUIRED, first
        return self.classic_join(first.member_id, owned, **kwargs)

    def classic_sync(self, member_id: str, generation: int, group_id: str = "g", **kwargs: Any) -> Any:
        response = self.reply(self.sync(group_id, member_id, generation, protocol_type="consumer",
                                        protocol_name=PROTOCOL, **kwargs))
        return response

    def classic_group(self, n: int = 2, partitions: int = 4) -> tuple[list[str], int]:
        """A Stable classic group: ``n`` cooperative members, the leader spreads foo's partitions."""
        ids = [self.join_new("g", client_id=f"c{i}", protocols=((PROTOCOL, self.subscription()),))[1]
               for i in range(n)]
        self.finish_initial_delay("g")
        group = self.group("g")
        assert isinstance(group, ClassicGroup) and group.state_name == "CompletingRebalance"
        generation = group.generation_id
        plan = {m: {"foo": [p for p in range(partitions) if p % n == i]} for i, m in enumerate(ids)}
        leader = group.leader_id
        assert leader is not None
        refs = [self.sync("g", m, generation) for m in ids if m != leader]
        self.sync("g", leader, generation, [(m, write_assignment(plan[m], 1)) for m in ids])
        assert all(self.reply(r).error_code == OK for r in refs)
        assert self.group("g").state_name == "Stable"
        return ids, generation

    def upgraded(self, member_id: str = "new") -> Any:
        """The first KIP-848 member joins the classic group ``g``."""
        return self.cjoin(member_id)


def test_the_first_consumer_heartbeat_converts_a_live_classic_group() -> None:
    h = Mixed({"foo": 4}, config())
    (a, b), generation = h.classic_group()
    before = len(h.records)
    joined = h.upgraded()
    assert joined.error_code == OK
    group = h.cgroup()
    # Kafka's order: the classic tombstone, then the converted group (metadata, epoch, targets,
    # target epoch, current assignments), then the joining member's own records.
    kinds = [type(r.key) for r in h.records[before:]]
    assert kinds[:9] == [
        GroupMetadataKey,
        ConsumerGroupMemberMetadataKey, ConsumerGroupMemberMetadataKey,
        ConsumerGroupMetadataKey,
        ConsumerGroupTargetAssignmentMemberKey, ConsumerGroupTargetAssignmentMemberKey,
        ConsumerGroupTargetAssignmentMetadataKey,
        ConsumerGroupCurrentMemberAssignmentKey, ConsumerGroupCurrentMemberAssignmentKey,
    ]
    assert h.records[before].value is None
    converted = h.records[before + 3].value
    assert converted is not None and converted.epoch == generation
    # The classic members are STABLE at the generation, holding what they had, assigned then.
    for member_id, mine in ((a, {0, 2}), (b, {1, 3})):
        member = group.members[member_id]
        assert member.uses_classic_protocol and member.classic is not None
        assert member.classic.session_timeout_ms == 10_000
        assert (member.member_epoch, member.state) == (generation, MemberState.STABLE)
        assert h.named(member.assigned_partitions) == {"foo": mine}
        assert {member.assignment_epoch(h.tid("foo"), p) for p in mine} == {generation}
        assert h.timers[("consumer-session", "g", member_id)] == h.now + 10_000
    # The newcomer bumped the epoch; everything it should get is still owned: nothing yet.
    assert group.group_epoch == generation + 1 and joined.member_epoch == generation + 1
    assert joined.assignment == ()
    assert not any(k[0].startswith("classic-") for k in h.timers)
    assert h.state("g") == "Reconciling"


def test_classic_members_give_partitions_up_through_rejoins() -> None:
    h = Mixed({"foo": 4}, config())
    (a, b), generation = h.classic_group()
    h.upgraded()
    group = h.cgroup()
    epoch = group.group_epoch
    # Uniform over 3 members and 4 partitions: one classic member keeps both of its partitions, the
    # other gives one to the newcomer.
    tid = h.tid("foo")
    giver, keeper = (a, b) if len(group.target(a).get(tid, ())) < 2 else (b, a)
    owned = {m: set(group.members[m].assigned_partitions[tid]) for m in (a, b)}
    # The classic members are told to rejoin (the group moved on) and a join timer runs.
    assert h.reply(h.heartbeat("g", giver, generation)).error_code == E.REBALANCE_IN_PROGRESS
    assert ("consumer-join", "g", giver) in h.timers
    # The giver rejoins declaring what it owns: it must give one partition up first, its epoch frozen.
    joined = h.classic_join(giver, {"foo": owned[giver]})
    assert (joined.error_code, joined.generation_id, joined.protocol_name, joined.leader) == (
        OK, generation, PROTOCOL, "")
    assert ("consumer-join", "g", giver) not in h.timers and ("consumer-sync", "g", giver) in h.timers
    assert h.cgroup().members[giver].state is MemberState.UNREVOKED_PARTITIONS
    synced = h.classic_sync(giver, generation)
    kept = decode_assignment(synced.assignment)["foo"]
    assert synced.error_code == OK and len(kept) == 1 and kept < owned[giver]
    assert ("consumer-sync", "g", giver) not in h.timers
    # Still revoking: rejoin. Then, without the revoked partition, it moves to the new epoch.
    assert h.reply(h.heartbeat("g", giver, generation)).error_code == E.REBALANCE_IN_PROGRESS
    again = h.classic_join(giver, {"foo": kept})
    assert again.generation_id == epoch
    assert h.classic_sync(giver, epoch).error_code == OK
    assert h.reply(h.heartbeat("g", giver, epoch)).error_code == OK
    # The keeper just catches up with the epoch; then the KIP-848 member gets the released partition.
    assert h.classic_join(keeper, {"foo": owned[keeper]}).generation_id == epoch
    got = h.cgh("new", epoch)
    assert h.named(got.assignment) == {"foo": owned[giver] - kept}
    assert h.state("g") == "Stable"
    # Generations are member epochs: an old one is ILLEGAL_GENERATION, also for commits of
    # partitions not held since then (KIP-1251 accepts those held since).
    assert h.reply(h.heartbeat("g", giver, generation)).error_code == E.ILLEGAL_GENERATION
    assert h.reply(h.heartbeat("g", giver, epoch + 1)).error_code == E.ILLEGAL_GENERATION
    ok = h.reply(h.commit("g", {("foo", min(kept)): 5}, generation_id=generation, member_id=giver))
    assert ok.topics[0].partitions[0].error_code == OK
    given = min(owned[giver] - kept)
    stale = h.reply(h.commit("g", {("foo", given): 5}, generation_id=generation, member_id=giver))
    assert stale.topics[0].partitions[0].error_code == E.ILLEGAL_GENERATION


def test_parked_classic_requests_are_told_to_rejoin_the_converted_group() -> None:
    h = Mixed({"foo": 4}, config())
    (a, b), _generation = h.classic_group()
    parked = h.join("g", a, protocols=((PROTOCOL, h.subscription({"foo": [0, 2]})),))  # a starts a rebalance
    assert h.pending(parked) and h.group("g").state_name == "PreparingRebalance"
    assert h.upgraded().error_code == OK
    assert h.reply(parked).error_code == E.REBALANCE_IN_PROGRESS
    assert isinstance(h.shard.group("g"), ConsumerGroup)
    assert set(h.cgroup().members) == {a, b, "new"}


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("disabled", "Cannot upgrade classic group g to consumer group because online upgrade is disabled."),
        ("downgrade", "Cannot upgrade classic group g to consumer group because online upgrade is disabled."),
        ("connect", "Cannot upgrade classic group g to consumer group because the group does not use the consumer "
                    "embedded protocol."),
        ("size", "Cannot upgrade classic group g to consumer group because the group size exceeds the consumer group "
                 "maximum size."),
        ("user-data", "Cannot upgrade classic group g to consumer group because an unsupported custom assignor is in "
                      "use. Please refer to the documentation or switch to a default assignor before re-attempting "
                      "the upgrade."),
        ("malformed", "Cannot upgrade classic group g to consumer group because the embedded consumer protocol is "
                      "malformed."),
        ("first-rebalance", "Cannot upgrade classic group g to consumer group because it has not completed its first "
                            "rebalance."),
    ],
)
def test_upgrade_refusals_are_group_id_not_found(setup: str, message: str) -> None:
    policy = {"disabled": ConsumerGroupMigrationPolicy.DISABLED,
              "downgrade": ConsumerGroupMigrationPolicy.DOWNGRADE}.get(setup, ConsumerGroupMigrationPolicy.BIDIRECTIONAL)
    h = Mixed({"foo": 4}, config(policy, consumer_group_max_size=1 if setup == "size" else 2**31 - 1,
                                 group_initial_rebalance_delay_ms=0 if setup != "first-rebalance" else 3_000))
    if setup == "connect":
        h.stable_group("g", 1, protocol_type="connect")
    elif setup == "malformed":
        h.stable_group("g", 1)  # its protocol metadata is no ConsumerProtocolSubscription
    elif setup == "user-data":
        member = h.join_new("g", protocols=(("my-assignor", h.subscription()),))[1]
        h.finish_initial_delay("g")
        generation = h.group("g").generation_id
        with_user_data = write_assignment({"foo": [0]}, 1)[:-4] + b"\x00\x00\x00\x02ud"
        h.sync("g", member, generation, [(member, with_user_data)])
    elif setup == "first-rebalance":
        h.join_new("g", protocols=((PROTOCOL, h.subscription()),))
        assert h.group("g").state_name == "PreparingRebalance"
    else:
        h.classic_group()
    records = len(h.records)
    refused = h.cjoin("new")
    assert (refused.error_code, refused.error_message) == (E.GROUP_ID_NOT_FOUND, message)
    assert len(h.records) == records and isinstance(h.shard.group("g"), ClassicGroup)


def test_the_sticky_state_librdkafka_copies_into_assignments_does_not_stop_an_upgrade() -> None:
    """librdkafka's leader echoes each member's subscription UserData (its cooperative-sticky state)
    into the member's assignment; for the clients' own assignors it is dropped, not refused."""
    h = Mixed({"foo": 4}, config())
    member = h.join_new("g", protocols=((PROTOCOL, h.subscription()),))[1]
    h.finish_initial_delay("g")
    sticky_state = b"\x00\x00\x00\x01\x00\x03foo\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x01"
    with_user_data = write_assignment({"foo": [0, 1, 2, 3]}, 0)[:-4] + len(sticky_state).to_bytes(4, "big") + sticky_state
    h.sync("g", member, h.group("g").generation_id, [(member, with_user_data)])
    assert h.upgraded().error_code == OK
    assert h.named(h.cgroup().members[member].assigned_partitions) == {"foo": {0, 1, 2, 3}}


def test_the_last_consumer_member_leaving_converts_the_group_back() -> None:
    h = Mixed({"foo": 4}, config())
    (a, b), _ = h.classic_group()
    h.upgraded()
    epoch = h.cgroup().group_epoch
    holds = {m: h.named(h.cgroup().members[m].assigned_partitions) for m in (a, b)}
    assert holds == {a: {"foo": {0, 2}}, b: {"foo": {1, 3}}}  # nobody rejoined: what they had
    before = len(h.records)
    left = h.cgh("new", -1)
    assert (left.error_code, left.member_epoch) == (OK, -1)
    group = h.shard.group("g")
    assert isinstance(group, ClassicGroup)
    # Consumer tombstones, then the classic group at the consumer group's epoch, which rebalances.
    assert all(r.value is None for r in h.records[before:-1])
    assert isinstance(h.records[-1].key, GroupMetadataKey) and h.records[-1].value is not None
    assert h.records[-1].value.generation == epoch and group.generation_id == epoch
    assert group.state_name == "PreparingRebalance" and group.protocol_name == PROTOCOL
    assert set(group.members) == {a, b}
    # Each member's classic assignment is what it holds in the consumer group (Kafka: its target).
    assert {m: decode_assignment(group.members[m].assignment) for m in (a, b)} == holds
    assert not any(k[0].startswith("consumer-") for k in h.timers)
    # The classic members rejoin a classic group as usual.
    assert h.reply(h.heartbeat("g", a, epoch)).error_code == E.REBALANCE_IN_PROGRESS
    ja = h.join("g", a, protocols=((PROTOCOL, h.subscription({"foo": [0, 2]})),))
    jb = h.join("g", b, protocols=((PROTOCOL, h.subscription({"foo": [1, 3]})),))
    assert h.reply(ja).generation_id == h.reply(jb).generation_id == epoch + 1


@pytest.mark.parametrize(
    ("policy", "max_size"),
    [(ConsumerGroupMigrationPolicy.UPGRADE, 2**31 - 1), (ConsumerGroupMigrationPolicy.BIDIRECTIONAL, 1)],
)
def test_no_downgrade_against_the_policy_or_group_max_size(policy: ConsumerGroupMigrationPolicy, max_size: int) -> None:
    h = Mixed({"foo": 4}, config(policy, group_max_size=max_size))
    h.cjoin("k1")
    a = h.classic_member().member_id
    b = h.classic_member().member_id
    h.cgh("k1", -1)
    # Only classic members are left, and the group stays a consumer group.
    assert isinstance(h.shard.group("g"), ConsumerGroup)
    assert set(h.cgroup().members) == {a, b}
    # They keep working: told to rejoin, they get their targets.
    epoch = h.cgroup().group_epoch
    for member in (a, b):
        assert h.reply(h.heartbeat("g", member, h.cgroup().members[member].member_epoch)).error_code == (
            E.REBALANCE_IN_PROGRESS)
        assert h.classic_join(member, h.named(h.cgroup().members[member].assigned_partitions)).generation_id == epoch
    assert h.named(h.cgroup().target(a))["foo"] | h.named(h.cgroup().target(b))["foo"] == {0, 1, 2, 3}


def test_classic_members_join_a_consumer_group_and_leave_it() -> None:
    h = Mixed({"foo": 4}, config())
    h.cjoin("k1")
    h.cgh("k1", 1, owned={"foo": range(4)})
    joined = h.classic_member({})
    c = joined.member_id
    assert joined.error_code == OK and joined.generation_id == 2
    assert h.shard.group("g").state_name in ("Reconciling", "Stable")  # type: ignore[union-attr]
    described = h.describe_consumer("g").groups[0]
    assert {m.member_id: m.member_type for m in described.members} == {"k1": 1, c: 0}
    # k1 revokes two partitions, then c gets them on its next rejoin.
    revoking = h.cgh("k1", 1)
    h.cgh("k1", 1, owned=h.named(revoking.assignment))
    assert h.classic_sync(c, 2).assignment == write_assignment({}, 1)
    assert h.reply(h.heartbeat("g", c, 2)).error_code == E.REBALANCE_IN_PROGRESS  # what it waited for is free
    again = h.classic_join(c, {})
    assert decode_assignment(h.classic_sync(c, again.generation_id).assignment) == {"foo": frozenset({0, 1, 2, 3}) - set(
        h.named(h.cgroup().members["k1"].assigned_partitions)["foo"])}
    # Leaving through the classic API: fenced, the group epoch bumped once, the group stays KIP-848.
    left = h.reply(h.leave("g", c, LeavingMember("ghost")))
    assert [(m.member_id, m.error_code) for m in left.members] == [(c, OK), ("ghost", E.UNKNOWN_MEMBER_ID)]
    assert set(h.cgroup().members) == {"k1"}


def test_classic_requests_a_consumer_group_refuses() -> None:
    h = Mixed({"foo": 4}, config())
    h.cjoin("k1")
    assert h.classic_join("", protocol_type="connect").error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.classic_join("stranger", protocols=((PROTOCOL, b"\x00"),)).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    c = h.classic_member().member_id
    # Once a classic member is in, others must share one of its protocols.
    assert h.classic_join("", protocols=(("range", h.subscription()),)).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.reply(h.heartbeat("g", "k1", 1)).error_code == E.UNKNOWN_MEMBER_ID  # not a classic member
    assert h.reply(h.heartbeat("g", "nope", 1)).error_code == E.UNKNOWN_MEMBER_ID
    epoch = h.cgroup().members[c].member_epoch
    assert h.reply(h.sync("g", c, epoch, protocol_type="consumer", protocol_name="range")).error_code == (
        E.INCONSISTENT_GROUP_PROTOCOL)
    assert h.reply(h.sync("g", c, epoch + 5)).error_code == E.ILLEGAL_GENERATION
    # With migrations disabled no classic member may join (KAFKA-20640).
    d = Mixed({"foo": 4}, config(ConsumerGroupMigrationPolicy.DISABLED))
    d.cjoin("k1")
    refused = d.classic_join("")
    assert refused.error_code == E.INCONSISTENT_GROUP_PROTOCOL


def test_join_and_sync_timeouts_fence_classic_members() -> None:
    h = Mixed({"foo": 4}, config())
    h.cjoin("k1")
    c = h.classic_member({}, rebalance_timeout_ms=5_000).member_id
    assert ("consumer-sync", "g", c) in h.timers
    h.advance(5_000)  # never synced
    assert c not in h.cgroup().members
    d = h.classic_member({}, rebalance_timeout_ms=5_000).member_id
    h.classic_sync(d, h.cgroup().members[d].member_epoch)
    h.cjoin("k2")  # a new rebalance: d is told to rejoin and does not
    assert h.reply(h.heartbeat("g", d, h.cgroup().members[d].member_epoch)).error_code == E.REBALANCE_IN_PROGRESS
    h.advance(5_000)
    assert d not in h.cgroup().members


def test_an_empty_consumer_group_becomes_classic_on_a_join() -> None:
    h = Mixed({"foo": 4}, config(ConsumerGroupMigrationPolicy.DISABLED))  # offline: whatever the policy
    h.cjoin("k1")
    h.cgh("k1", -1)
    assert h.cgroup().is_empty
    assert h.classic_join("stale-id").error_code == E.UNKNOWN_MEMBER_ID
    first = h.classic_join("")
    assert first.error_code == E.MEMBER_ID_REQUIRED
    assert isinstance(h.shard.group("g"), ClassicGroup)


def test_a_classic_static_member_replacing_the_last_consumer_member_downgrades() -> None:
    h = Mixed({"foo": 4}, config())
    (a, b), _generation = h.classic_group()
    h.cjoin("new", instance_id="i1")
    # Let the classic members catch up so that the target is current.
    for member in (a, b):
        owned = h.named(h.cgroup().members[member].assigned_partitions)
        h.classic_join(member, owned)
        h.classic_join(member, h.named(h.cgroup().members[member].assigned_partitions))
    h.cgh("new", h.cgroup().members["new"].member_epoch, owned=h.named(h.cgroup().members["new"].assigned_partitions))
    epoch = h.cgroup().group_epoch
    held = h.named(h.cgroup().members["new"].assigned_partitions)
    replaced = h.classic_join("", held, instance_id="i1")
    assert replaced.error_code == OK and replaced.member_id != "new"
    group = h.shard.group("g")
    assert isinstance(group, ClassicGroup) and group.generation_id == epoch
    assert set(group.members) == {a, b, replaced.member_id}
    assert group.static_members == {"i1": replaced.member_id}
    assert decode_assignment(group.members[replaced.member_id].assignment) == {
        t: frozenset(ps) for t, ps in held.items()}


def test_a_restart_mid_migration_keeps_every_member() -> None:
    h = Mixed({"foo": 4}, config())
    (a, b), _generation = h.classic_group()
    h.upgraded()
    joined = h.classic_join(a, {"foo": [0, 2]})
    h.restart()
    group = h.cgroup()
    assert set(group.members) == {a, b, "new"}
    assert group.members[a].uses_classic_protocol and group.members[a].member_epoch == joined.generation_id
    # Fresh sessions on load, on each member's own timeout.
    assert h.timers[("consumer-session", "g", a)] == h.now + 10_000
    assert h.timers[("consumer-session", "g", "new")] == h.now + h.config.consumer_group_session_timeout_ms
    # The classic member carries on where it was.
    assert h.classic_sync(a, joined.generation_id).error_code == OK
    assert h.cgh("new", group.members["new"].member_epoch).error_code == OK


def test_the_session_timeout_of_the_last_consumer_member_downgrades() -> None:
    h = Mixed({"foo": 4}, config())
    (a, b), _ = h.classic_group()
    h.upgraded()

    def poll(member: str) -> None:
        """What a classic client's poll loop does: heartbeat, and rejoin and sync when told."""
        group = h.shard.group("g")
        generation = group.members[member].member_epoch if isinstance(group, ConsumerGroup) else group.generation_id  # type: ignore[union-attr]
        if h.reply(h.heartbeat("g", member, generation)).error_code == OK:
            return
        owned = h.named(group.members[member].assigned_partitions) if isinstance(group, ConsumerGroup) else {}
        joined = h.classic_join(member, owned)
        assert joined.error_code == OK
        assert h.classic_sync(member, joined.generation_id).error_code == OK

    # The classic members keep polling; the KIP-848 member goes silent for its session timeout.
    for _ in range(12):
        h.advance(5_000)
        if isinstance(h.shard.group("g"), ClassicGroup):
            break
        poll(a)
        poll(b)
    group = h.shard.group("g")
    assert isinstance(group, ClassicGroup)
    assert set(group.members) == {a, b}
    assert any(e.reason == "session-timeout" for e in h.events_of(MemberFenced))


def downgraded_by_a_leaving_member(h: Mixed) -> tuple[str, str, int]:
    """Classic members a and b, a KIP-848 member joins and leaves: the group is classic again at
    the consumer group's epoch, rebalancing in memory only."""
    (a, b), _ = h.classic_group()
    h.upgraded()
    epoch = h.cgroup().group_epoch
    assert h.cgh("new", -1).error_code == OK
    assert h.state("g") == "PreparingRebalance"
    return a, b, epoch


def rejoin(h: Mixed, *members: str) -> int:
    """Every member rejoins and syncs (the leader hands back what each holds); the new generation."""
    refs = [h.join("g", m, protocols=((PROTOCOL, h.subscription()),)) for m in members]
    joined = [h.reply(r) for r in refs]
    generation = joined[0].generation_id
    group = h.shard.group("g")
    assert isinstance(group, ClassicGroup) and group.leader_id is not None
    plan = [(m, group.members[m].assignment) for m in members]
    syncs = [h.sync("g", m, generation, plan if m == group.leader_id else ()) for m in members]
    assert all(h.reply(r).error_code == OK for r in syncs)
    return generation


def test_a_restart_before_the_downgrade_rebalance_completes_starts_it_again() -> None:
    """Seed 50506 of the rolling migrations: the rebalance the downgrade prepared is not in the log;
    the loaded group recognises the downgrade's record and prepares it again, so the members rejoin."""
    h = Mixed({"foo": 4}, config())
    a, b, epoch = downgraded_by_a_leaving_member(h)
    h.restart()
    group = h.shard.group("g")
    assert isinstance(group, ClassicGroup) and group.generation_id == epoch
    assert group.state_name == "PreparingRebalance" and set(group.members) == {a, b}
    assert h.reply(h.heartbeat("g", a, epoch)).error_code == E.REBALANCE_IN_PROGRESS
    assert rejoin(h, a, b) == epoch + 1
    # Once completed (a new GroupMetadata), a restart owes nothing any more.
    h.restart()
    assert h.state("g") == "Stable"
    assert h.reply(h.heartbeat("g", a, epoch + 1)).error_code == OK


def test_a_compacted_log_without_the_downgrade_record_owes_no_rebalance() -> None:
    """Compaction keeps the consumer group's tombstones (delete.retention.ms) but drops the
    downgrade's GroupMetadata once the completed rebalance wrote a newer one: the tombstones are
    then followed by a record of a later generation, which is not the downgrade's."""
    h = Mixed({"foo": 4}, config())
    a, b, epoch = downgraded_by_a_leaving_member(h)
    assert rejoin(h, a, b) == epoch + 1
    latest = {(type(r.key), r.key): i for i, r in enumerate(h.records)}
    compacted = [r for i, r in enumerate(h.records) if latest[(type(r.key), r.key)] == i]
    shard = loaded(([r] for r in compacted), h.config)
    shard.on_loaded(h.now)
    group = shard.group("g")
    assert isinstance(group, ClassicGroup) and group.generation_id == epoch + 1
    assert group.state_name == "Stable"


def test_a_static_replacement_that_needed_no_rebalance_needs_none_after_a_restart() -> None:
    """A classic static member replacing the last KIP-848 member with the same subscription and a
    current target downgrades without a rebalance (Kafka too); a restart does not start one."""
    h = Mixed({"foo": 4}, config())
    (a, b), _generation = h.classic_group()
    h.cjoin("new", instance_id="i1")
    for member in (a, b):
        h.classic_join(member, h.named(h.cgroup().members[member].assigned_partitions))
        h.classic_join(member, h.named(h.cgroup().members[member].assigned_partitions))
    h.cgh("new", h.cgroup().members["new"].member_epoch, owned=h.named(h.cgroup().members["new"].assigned_partitions))
    group = h.cgroup()
    assert group.assignment_epoch == group.group_epoch and group.members["new"].subscribed_topic_names == ("foo",)
    replaced = h.classic_join("", h.named(group.members["new"].assigned_partitions), instance_id="i1")
    assert replaced.error_code == OK
    assert h.state("g") == "Stable"
    h.restart()
    assert h.state("g") == "Stable"


def test_a_static_replacement_with_another_subscription_rebalances_after_a_restart() -> None:
    h = Mixed({"foo": 4, "bar": 2}, config())
    (a, b), _generation = h.classic_group()
    h.cjoin("new", instance_id="i1")
    for member in (a, b):
        h.classic_join(member, h.named(h.cgroup().members[member].assigned_partitions))
        h.classic_join(member, h.named(h.cgroup().members[member].assigned_partitions))
    h.cgh("new", h.cgroup().members["new"].member_epoch, owned=h.named(h.cgroup().members["new"].assigned_partitions))
    held = h.named(h.cgroup().members["new"].assigned_partitions)
    wider = encode_subscription(["bar", "foo"], 1, None, held)
    replaced = h.classic_join("", held, instance_id="i1", protocols=((PROTOCOL, wider),))
    assert replaced.error_code == OK
    assert h.state("g") == "PreparingRebalance"
    h.restart()
    assert h.state("g") == "PreparingRebalance"


def test_what_a_follower_has_not_given_up_yet_is_still_its_own_after_an_upgrade() -> None:
    """A cooperative rebalance: the leader's assignment takes partitions away from ``a`` (to hand them
    over in the next generation), and the group is upgraded before ``a`` heard it: ``a`` still owns
    them (its JoinGroup said so) and nobody may get them until its next JoinGroup gives them up."""
    h = Mixed({"foo": 4}, config())
    owned_by_a = {"foo": [0, 1, 2, 3]}
    a = h.join_new("g", client_id="a", protocols=((PROTOCOL, h.subscription(owned_by_a)),))[1]
    b = h.join_new("g", client_id="b", protocols=((PROTOCOL, h.subscription()),))[1]
    h.finish_initial_delay("g")
    group = h.group("g")
    generation = group.generation_id
    plan = {a: {"foo": [0, 2]}, b: {}}  # cooperative first round: a revokes 1 and 3, b waits
    leader = group.leader_id
    follower = b if leader == a else a
    h.sync("g", leader, generation, [(m, write_assignment(plan[m], 1)) for m in (a, b)])
    assert h.group("g").state_name == "Stable"  # the follower has not synced yet
    joined = h.upgraded()
    assert joined.error_code == OK
    held = h.named(h.cgroup().members[a].assigned_partitions)
    assert held == {"foo": {0, 1, 2, 3}}
    assert joined.assignment == ()
    # a learns its assignment (it must rejoin), gives 1 and 3 up in its JoinGroup, and they move.
    assert h.classic_sync(follower, generation).error_code in (OK, E.REBALANCE_IN_PROGRESS)
    h.classic_join(a, {"foo": [0, 2]})
    h.classic_join(a, h.named(h.cgroup().members[a].assigned_partitions))
    got = h.cgh("new", h.cgroup().members["new"].member_epoch)
    assert got.error_code == OK
    assert h.named(h.cgroup().members["new"].assigned_partitions)["foo"] <= {1, 3}
