"""Streams groups hosted by the shard: heartbeats, timers, offsets, ListGroups, DescribeGroups and
StreamsGroupDescribe through the shard's one entry point, with the core harness checking after
every step that a replay of the log equals the live state (the group type's whole registration)."""

from __future__ import annotations

import uuid
from typing import Any

from coordinator.core.config import GroupConfig
from coordinator.core.errors import ErrorCode
from coordinator.core.events import MemberJoined, WarmupTasksChanged
from coordinator.core.requests import TopicsChanged
from coordinator.core.streams.heartbeat_request import StreamsHeartbeat
from coordinator.core.streams.registration import SESSION_TIMER, StreamsGroup
from coordinator.core.streams.requests import (
    StreamsGroupDescribe,
    StreamsGroupHeartbeat,
    StreamsGroupHeartbeatResponse,
)
from coordinator.core.streams.status import Status
from coordinator.core.topics import TopicInfo
from tests.core.harness import FAST, Harness
from tests.core.streams.harness import TOPOLOGY, Client, tasks_of

WORDS = TopicInfo(uuid.uuid4(), "words", 6)
CHANGELOG = TopicInfo(uuid.uuid4(), "app-counts-changelog", 6)


class StreamsShard(Harness):
    def __init__(self, config: GroupConfig = FAST) -> None:
        super().__init__(config)
        self.send(TopicsChanged((WORDS,), snapshot=True))

    def hb(self, member_id: str, epoch: int, owned: frozenset[tuple[str, int]] | None = None,
           group_id: str = "app") -> StreamsGroupHeartbeatResponse:
        joining = epoch == 0
        request = StreamsHeartbeat(
            group_id, member_id, epoch, rebalance_timeout_ms=30_000 if joining else -1,
            topology=TOPOLOGY if joining else None, process_id=f"p-{member_id}",
            active_tasks=owned if owned is not None else (frozenset() if joining else None),
            standby_tasks=frozenset() if joining or owned is not None else None,
            warmup_tasks=frozenset() if joining or owned is not None else None)
        ref = self.next_ref()
        self.send(StreamsGroupHeartbeat(ref, request, "client", "/127.0.0.1"))
        reply = self.reply(ref)
        assert isinstance(reply, StreamsGroupHeartbeatResponse)
        return reply

    def streams_describe(self, *group_ids: str) -> tuple[dict[str, Any], ...]:
        ref = self.next_ref()
        self.send(StreamsGroupDescribe(ref, group_ids))
        groups: tuple[dict[str, Any], ...] = self.reply(ref).groups
        return groups


def test_the_first_member_asks_for_its_internal_topics_and_gets_every_task_once_they_exist() -> None:
    h = StreamsShard()
    first = h.hb("a", 0)
    assert first.error_code == ErrorCode.NONE
    assert [t.name for t in first.internal_topics] == ["app-counts-changelog"]
    assert first.body["status"][0]["status_code"] == Status.MISSING_INTERNAL_TOPICS
    assert tasks_of(first.body.get("active_tasks")) == frozenset()

    h.send(TopicsChanged((CHANGELOG,)))  # what the edge does with the topics asked for
    ready = h.hb("a", first.body["member_epoch"], frozenset())
    assert ready.internal_topics == ()
    assert tasks_of(ready.body["active_tasks"]) == {("0", p) for p in range(6)}
    group = h.shard.groups["app"]
    assert isinstance(group, StreamsGroup) and group.state_name == "Stable"


def test_a_second_member_gets_half_the_tasks_after_the_first_revokes_them() -> None:
    h = StreamsShard()
    h.send(TopicsChanged((CHANGELOG,)))
    a = h.hb("a", 0)  # the topics exist: every task at once
    all_tasks = tasks_of(a.body["active_tasks"])
    b = h.hb("b", 0)
    assert tasks_of(b.body["active_tasks"]) == frozenset()  # not before "a" revoked them
    a2 = h.hb("a", a.body["member_epoch"], all_tasks)
    kept = tasks_of(a2.body["active_tasks"])
    assert len(kept) == 3
    assert tasks_of(h.hb("b", b.body["member_epoch"], frozenset()).body.get("active_tasks")) == frozenset()
    h.hb("a", a2.body["member_epoch"], kept)  # "a" has revoked: now they are free
    b2 = h.hb("b", b.body["member_epoch"], frozenset())
    assert tasks_of(b2.body["active_tasks"]) == all_tasks - kept


def test_a_silent_member_is_fenced_at_its_session_timeout_and_its_tasks_move() -> None:
    h = StreamsShard(GroupConfig(streams_group_session_timeout_ms=10_000))
    h.send(TopicsChanged((CHANGELOG,)))
    a = h.hb("a", 0)
    h.hb("a", a.body["member_epoch"], frozenset())
    assert (SESSION_TIMER, "app", "a") in h.timers
    b = h.hb("b", 0)
    h.advance(10_001)  # neither heartbeats again: both sessions expire
    assert "app" in h.shard.groups and not h.shard.groups["app"].members
    assert h.hb("b", b.body["member_epoch"]).error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_list_groups_describe_groups_and_streams_group_describe_see_the_group() -> None:
    h = StreamsShard()
    h.send(TopicsChanged((CHANGELOG,)))
    a = h.hb("a", 0)
    h.hb("a", a.body["member_epoch"], frozenset())
    listed = h.list_groups(types=("streams",))
    assert [(g.group_id, g.group_type, g.group_state) for g in listed.groups] == [("app", "streams", "Stable")]
    assert h.describe("app").groups[0].group_state == "Dead"  # the classic API: not a classic group
    described, missing = h.streams_describe("app", "nope")
    assert described["error_code"] == ErrorCode.NONE and described["group_state"] == "Stable"
    assert [m["member_id"] for m in described["members"]] == ["a"]
    assert missing["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND


def test_members_commit_at_their_epoch_and_a_stranger_is_refused() -> None:
    h = StreamsShard()
    h.send(TopicsChanged((CHANGELOG,)))
    a = h.hb("a", 0)
    a = h.hb("a", a.body["member_epoch"], frozenset())
    epoch = a.body["member_epoch"]
    ok = h.reply(h.commit("app", {("words", 0): 42}, generation_id=epoch, member_id="a"))
    assert ok.topics[0].partitions[0].error_code == ErrorCode.NONE
    stranger = h.reply(h.commit("app", {("words", 1): 7}, generation_id=epoch, member_id="zz"))
    assert stranger.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_MEMBER_ID
    fetched = h.fetch("app", {"words": (0,)})
    assert fetched.topics[0].partitions[0].committed_offset == 42


def test_a_restart_replays_the_group_and_its_members_keep_their_tasks() -> None:
    h = StreamsShard()
    h.send(TopicsChanged((CHANGELOG,)))
    a = h.hb("a", 0)
    owned = tasks_of(a.body["active_tasks"])
    h.restart()  # the harness compares the replayed shard with the live one after every step too
    assert (SESSION_TIMER, "app", "a") in h.timers
    again = h.hb("a", a.body["member_epoch"], owned)
    assert again.error_code == ErrorCode.NONE and again.body["member_epoch"] == a.body["member_epoch"]


def test_a_group_id_of_another_type_is_not_a_streams_group() -> None:
    h = StreamsShard()
    h.stable_group("classic-app", n=1)
    refused = h.hb("a", 0, group_id="classic-app")
    assert refused.error_code == ErrorCode.GROUP_ID_NOT_FOUND


def test_an_invalid_topology_is_refused_and_writes_nothing() -> None:
    h = StreamsShard()
    before = len(h.records)
    ref = h.next_ref()
    h.send(StreamsGroupHeartbeat(ref, StreamsHeartbeat("app", "a", 0, rebalance_timeout_ms=1000), "c", "/h"))
    assert h.reply(ref).error_code == ErrorCode.INVALID_REQUEST  # no topology on joining
    assert len(h.records) == before and "app" not in h.shard.groups


def test_a_heartbeat_of_an_unknown_group_that_is_not_a_join_is_group_id_not_found() -> None:
    h = StreamsShard()
    assert h.hb("ghost", 3).error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert "app" not in h.shard.groups


def test_a_join_replaces_an_empty_group_of_another_type_and_keeps_its_offsets() -> None:
    h = StreamsShard()
    h.send(TopicsChanged((CHANGELOG,)))
    h.commit("app", {("words", 0): 42})  # an app that ran with the classic protocol: offsets only
    assert h.shard.groups["app"].group_type == "classic"
    joined = h.hb("a", 0)
    assert joined.error_code == ErrorCode.NONE
    assert isinstance(h.shard.groups["app"], StreamsGroup)
    assert h.fetch("app", {"words": (0,)}).topics[0].partitions[0].committed_offset == 42



def test_a_v1_newcomer_warms_up_before_taking_its_tasks_and_the_events_say_so() -> None:
    h = StreamsShard(GroupConfig(streams_group_acceptable_recovery_lag=100, streams_group_num_warmup_replicas=2))
    h.send(TopicsChanged((CHANGELOG,)))
    a, b = Client("a"), Client("b")

    def beat(client: Client) -> None:
        ref = h.next_ref()
        h.send(StreamsGroupHeartbeat(ref, client.request(), "client", "/127.0.0.1"))
        reply = h.reply(ref)
        assert reply.error_code == ErrorCode.NONE, reply
        client.take(reply.body)

    beat(a)
    assert len(a.active) == 6
    warmed: set[tuple[str, int]] = set()
    for _ in range(20):
        beat(b)
        beat(a)
        warmed |= b.warmup
        assert not (a.active & b.active)  # never active twice
    assert len(a.active) == len(b.active) == 3
    assert b.active <= warmed  # every task it took it first restored as a warm-up
    changes = h.events_of(WarmupTasksChanged)
    assert sum(e.started for e in changes) == 3 and sum(e.promoted for e in changes) == 3
    assert {e.group_type for e in changes} == {"streams"}
    assert [e.member_id for e in h.events_of(MemberJoined) if e.group_type == "streams"] == ["a", "b"]


def test_a_group_its_last_member_left_is_deleted_by_delete_groups_and_stays_gone_after_a_restart() -> None:
    h = StreamsShard()
    h.send(TopicsChanged((CHANGELOG,)))
    a = h.hb("a", 0)
    assert h.delete_groups("app").results[0].error_code == ErrorCode.NON_EMPTY_GROUP
    left = h.hb("a", -1)
    assert (left.error_code, left.body["member_epoch"]) == (ErrorCode.NONE, -1)
    assert a.body["member_epoch"] >= 1 and h.shard.groups["app"].state_name == "Empty"
    assert h.delete_groups("app").results[0].error_code == ErrorCode.NONE
    assert "app" not in h.shard.groups
    h.restart()
    assert "app" not in h.shard.groups
