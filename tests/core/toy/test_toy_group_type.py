"""A group type defined only in tests/ plugs into the core by its registration alone: its request
is served, its record written and replayed (replay equals live after every step, the harness's
check), its timer fires, ListGroups lists it with its own type, offsets and DeleteGroups reach it
through the Group contract, and a shard not given it skips its records as unknown."""

from __future__ import annotations

import pytest

from coordinator.core.errors import ErrorCode
from coordinator.core.record_codec import Record, RecordStruct, RecordTypeDecl
from coordinator.core.registry import Registration, ShardContext
from coordinator.core.responses import ListedGroup
from coordinator.core.shard import GROUP_TYPES, CoordinatorShard
from tests.core.harness import Harness
from tests.core.toy.group_type import (
    SESSION_TIMER,
    TOY_GROUP,
    ToyGroupKey,
    ToyGroupValue,
    ToyJoin,
    ToyJoinResponse,
    register,
)
from tests.core.toy.settings import ToySettings

WITH_TOY = (*GROUP_TYPES, register)
SESSION_MS = ToySettings().toy_session_timeout_ms  # a shard built without the node's settings: the default


def toy_join(h: Harness, group_id: str, member_id: str) -> object:
    ref = h.next_ref()
    h.send(ToyJoin(ref, group_id, member_id))
    return h.reply(ref)


def toy_join_response(epoch: int, *members: str) -> ToyJoinResponse:
    return ToyJoinResponse(ErrorCode.NONE, epoch, members)


def test_a_toy_group_is_served_written_and_replayed_like_a_built_in_one() -> None:
    h = Harness(group_types=WITH_TOY)
    assert set(h.shard.types) == {"classic", "consumer", "streams", "share", "toy"}
    assert toy_join(h, "t1", "a") == toy_join_response(1, "a")
    assert toy_join(h, "t1", "b") == toy_join_response(2, "a", "b")
    assert toy_join(h, "t1", "a") == toy_join_response(2, "a", "b")  # already a member: nothing written
    assert h.records == [
        Record(ToyGroupKey("t1"), ToyGroupValue(1, ("a",))),
        Record(ToyGroupKey("t1"), ToyGroupValue(2, ("a", "b"))),
    ]
    assert h.shard.codec.encode_record(h.records[0])[0] == TOY_GROUP
    assert h.timers[SESSION_TIMER, "t1"] == h.now + SESSION_MS

    h.now += 1_000
    h.restart()  # a new shard loads the log: the same group, and a fresh session
    assert h.shard.group("t1") is not None and set(h.shard.group("t1").members) == {"a", "b"}
    assert h.timers[SESSION_TIMER, "t1"] == h.now + SESSION_MS


def test_its_timer_fires_through_the_shard_and_writes_a_record() -> None:
    h = Harness(group_types=WITH_TOY)
    toy_join(h, "t1", "a")
    h.advance(SESSION_MS - 1)
    assert h.state("t1") == "Stable"
    h.advance(1)
    assert h.state("t1") == "Empty"
    assert h.records[-1] == Record(ToyGroupKey("t1"), ToyGroupValue(2))


def test_list_groups_lists_it_with_its_own_type_and_filters_by_it() -> None:
    h = Harness(group_types=WITH_TOY)
    toy_join(h, "t1", "a")
    h.commit("simple", {("t", 0): 5})  # a classic (simple) group beside it
    listed = {g.group_id: g for g in h.list_groups().groups}
    assert listed["t1"] == ListedGroup("t1", "toy", "Stable", "toy")
    assert listed["simple"].group_type == "classic"
    assert [g.group_id for g in h.list_groups(types=("TOY",)).groups] == ["t1"]
    assert [g.group_id for g in h.list_groups(types=("classic",)).groups] == ["simple"]
    # A shard that does not host the type treats the name as Kafka does an unknown one: no match.
    plain = Harness()
    assert plain.list_groups(types=("toy",)).groups == ()


def test_offsets_and_deletion_reach_it_through_the_group_contract() -> None:
    h = Harness(group_types=WITH_TOY)
    toy_join(h, "t1", "a")
    stranger = h.reply(h.commit("t1", {("t", 0): 7}, member_id="x"))
    assert stranger.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_MEMBER_ID
    member = h.reply(h.commit("t1", {("t", 0): 7}, member_id="a"))
    assert member.topics[0].partitions[0].error_code == ErrorCode.NONE
    assert h.delete_groups("t1").results[0].error_code == ErrorCode.NON_EMPTY_GROUP
    h.advance(SESSION_MS)  # the session empties it
    assert h.delete_groups("t1").results[0].error_code == ErrorCode.NONE
    assert h.shard.group("t1") is None and h.records[-1] == Record(ToyGroupKey("t1"), None)
    h.restart()
    assert h.shard.group("t1") is None and h.fetch("t1").topics == ()


def test_a_classic_request_for_its_group_id_sees_a_group_of_another_type() -> None:
    h = Harness(group_types=WITH_TOY)
    toy_join(h, "t1", "a")
    assert h.reply(h.join("t1")).error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    h.commit("classic-one", {("t", 0): 1})
    ref = h.next_ref()
    h.send(ToyJoin(ref, "classic-one", "a"))
    assert h.reply(ref).error_code == ErrorCode.GROUP_ID_NOT_FOUND


def test_a_shard_not_given_the_type_skips_its_records_as_unknown() -> None:
    toy = CoordinatorShard(group_types=WITH_TOY)
    rtype, key, value = toy.codec.encode_record(Record(ToyGroupKey("t1"), ToyGroupValue(1, ("a",))))
    identity = rtype.to_bytes(2, "big") + len(key).to_bytes(4, "big") + key
    assert CoordinatorShard().replay_encoded([(identity, value)]) == 1
    assert toy.replay_encoded([(identity, value)]) == 0 and toy.group("t1") is not None


def test_a_group_type_taking_a_record_id_already_declared_stops_the_shard() -> None:
    class ThiefKey(RecordStruct, frozen=True):
        group_id: str

    class Thief:
        def __init__(self, ctx: ShardContext) -> None:
            self.registration = Registration(
                "thief", record_types=(RecordTypeDecl(TOY_GROUP, "Thief", ThiefKey, {0: ToyGroupValue}),),
                replayers={ThiefKey: lambda k, v, live: None})

    with pytest.raises(ValueError, match="record type 4242 declared twice"):
        CoordinatorShard(group_types=(*WITH_TOY, Thief))
    with pytest.raises(ValueError, match="group type 'toy' registered twice"):
        CoordinatorShard(group_types=(*WITH_TOY, register))


def test_a_shard_given_the_toys_settings_hands_them_to_the_type() -> None:
    shard = CoordinatorShard(group_types=WITH_TOY, type_settings={ToySettings: ToySettings(500)})
    result = shard.handle(ToyJoin(1, "t1", "a"), 1_000)
    assert [(op.key, op.deadline_ms) for op in result.timers] == [((SESSION_TIMER, "t1"), 1_500)]
