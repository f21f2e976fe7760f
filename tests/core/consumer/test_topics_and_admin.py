"""Consumer groups and topic metadata (creation, growth, deletion, regex), and the APIs around the
group: ConsumerGroupDescribe, ListGroups, DescribeGroups, DeleteGroups, offset expiry (the
OffsetCommit/OffsetFetch member-epoch checks: test_offsets.py)."""

from __future__ import annotations

from uuid import UUID

from coordinator.core.config import GroupConfig
from coordinator.core.errors import ErrorCode
from coordinator.core.events import GroupDeleted, RebalanceStarted
from coordinator.core.topics import TopicInfo, TopicsImage, compile_regex
from tests.core.consumer.harness import ConsumerHarness

OK = ErrorCode.NONE
E = ErrorCode


# ---- topic metadata ------------------------------------------------------------------------------------


def test_subscribing_to_a_missing_topic_is_not_an_error_and_creation_assigns_it() -> None:
    h = ConsumerHarness({})
    joined = h.cjoin("a", names=("later",))
    assert (joined.error_code, joined.member_epoch, joined.assignment) == (OK, 1, ())
    h.create_topic("later", 2)
    assert h.cgroup().group_epoch == 1  # lazily: the next heartbeat bumps
    response = h.cgh("a", 1)
    assert (response.member_epoch, h.named(response.assignment)) == (2, {"later": {0, 1}})
    assert h.events_of(RebalanceStarted)[-1].reason == "subscribed topic metadata changed"


def test_partition_growth_bumps_the_epoch_and_assigns_new_partitions() -> None:
    h = ConsumerHarness({"foo": 2})
    h.cjoin("a")
    h.grow_topic("foo", 4)
    response = h.cgh("a", 1)
    assert (response.member_epoch, h.named(response.assignment)) == (2, {"foo": {0, 1, 2, 3}})


def test_unrelated_topic_changes_do_not_bump() -> None:
    h = ConsumerHarness({"foo": 2})
    h.cjoin("a")
    h.create_topic("other", 3)
    h.grow_topic("other", 5)
    assert h.cgh("a", 1).member_epoch == 1
    assert h.cgroup().group_epoch == 1


def test_topic_deletion_revokes_its_partitions() -> None:
    h = ConsumerHarness({"foo": 2, "bar": 2})
    h.cjoin("a", names=("foo", "bar"))
    h.delete_topic("bar")
    revoke = h.cgh("a", 1)
    assert h.named(revoke.assignment) == {"foo": {0, 1}}  # bar's id is no longer known
    done = h.cgh("a", 1, owned={"foo": [0, 1]})
    assert done.member_epoch == 2
    # Re-created topics have a new id: assigned again under that id.
    h.create_topic("bar", 1)
    again = h.cgh("a", 2)
    assert (again.member_epoch, h.named(again.assignment)) == (3, {"foo": {0, 1}, "bar": {0}})


def test_regex_subscription_full_match_and_later_topics() -> None:
    h = ConsumerHarness({"pre-a": 1, "xpre": 1, "pre": 1})
    joined = h.cjoin("a", names=(), regex="^pre.*")
    # RE2 full match: "xpre" does not match; "pre" and "pre-a" do.
    assert h.named(joined.assignment) == {"pre-a": {0}, "pre": {0}}
    h.create_topic("pre-b", 2)
    response = h.cgh("a", 1)
    assert (response.member_epoch, h.named(response.assignment)) == (2, {"pre-a": {0}, "pre": {0}, "pre-b": {0, 1}})
    # Changing the regex is a subscription change.
    changed = h.cgh("a", 2, regex="^pre-b$")
    assert changed.member_epoch == 2  # revoking first
    assert h.named(changed.assignment) == {"pre-b": {0, 1}}
    # Dropping the regex (librdkafka sends "") leaves nothing.
    h.cgh("a", 2, owned={"pre-b": [0, 1]})
    dropped = h.cgh("a", 3, regex="")
    assert h.named(dropped.assignment) == {}


def test_a_regex_matches_only_topics_the_principal_may_describe() -> None:
    """Under an authorizer the edge sends the topics the member's principal may DESCRIBE; the regex
    resolves among those only (Kafka's filterTopicDescribeAuthorizedTopics). The filter is in the
    member's metadata record: the harness checks after every step that a replay equals live."""
    h = ConsumerHarness({"orders-eu": 1, "orders-us": 2, "audit": 1})
    joined = h.cjoin("a", names=(), regex="orders-.*", describable={"orders-eu", "audit"})
    assert h.named(joined.assignment) == {"orders-eu": {0}}
    assert h.shard.consumer.ctx.group("g").members["a"].regex_topics == {"orders-eu"}
    # A steady heartbeat with the same rights changes nothing.
    steady = h.cgh("a", 1, describable={"orders-eu", "audit"})
    assert (steady.member_epoch, steady.assignment) == (1, None)
    # The principal is granted orders-us: its next heartbeat brings it in (a new group epoch).
    granted = h.cgh("a", 1, describable={"orders-eu", "orders-us", "audit"})
    assert (granted.member_epoch, h.named(granted.assignment)) == (2, {"orders-eu": {0}, "orders-us": {0, 1}})
    # A topic created later that the principal may not describe is never matched.
    h.create_topic("orders-apac", 1)
    after = h.cgh("a", 2, describable={"orders-eu", "orders-us", "audit"})
    assert after.member_epoch == 2 and after.assignment is None
    # Revoked: orders-eu leaves the assignment.
    revoked = h.cgh("a", 2, describable={"orders-us"})
    assert h.named(revoked.assignment) == {"orders-us": {0, 1}}
    h.restart()
    assert h.shard.consumer.ctx.group("g").members["a"].regex_topics == {"orders-us"}
    # Without an authorizer (describable None) the filter goes: every match counts again.
    opened = h.cgh("a", revoked.member_epoch, owned={"orders-us": [0, 1]})
    assert h.shard.consumer.ctx.group("g").members["a"].regex_topics is None
    assert h.named(opened.assignment) == {"orders-eu": {0}, "orders-us": {0, 1}, "orders-apac": {0}}


def test_two_principals_with_one_regex_each_get_what_they_may_describe() -> None:
    h = ConsumerHarness({"orders-eu": 2, "orders-us": 2})
    h.cjoin("a", names=(), regex="orders-.*", describable={"orders-eu"})
    h.cjoin("b", names=(), regex="orders-.*", describable={"orders-eu", "orders-us"})
    a, b = h.cgh("a", 1, owned={"orders-eu": [0, 1]}), h.cgh("b", 2, owned={})
    for _ in range(4):  # let the revocations settle
        a = h.cgh("a", a.member_epoch, owned=h.named(a.assignment) if a.assignment else None)
        b = h.cgh("b", b.member_epoch, owned=h.named(b.assignment) if b.assignment else None)
    group = h.shard.consumer.ctx.group("g")
    topic_of = {h.tid(name): name for name in ("orders-eu", "orders-us")}
    held_by_a = {topic_of[t] for t in group.members["a"].assigned_partitions}
    assert held_by_a <= {"orders-eu"}
    assert "orders-us" in {topic_of[t] for t in group.members["b"].assigned_partitions}


def test_names_and_regex_together() -> None:
    h = ConsumerHarness({"foo": 1, "pre-x": 1})
    joined = h.cjoin("a", names=("foo",), regex="pre-.*")
    assert h.named(joined.assignment) == {"foo": {0}, "pre-x": {0}}


def test_regex_engine_is_re2_fullmatch() -> None:
    image = TopicsImage(TopicInfo(UUID(int=i), name, 1) for i, name in enumerate(["topic", "topic-1", "a.b"]))
    assert image.resolve("^topic") == {"topic"}
    assert image.resolve("^topic.*") == {"topic", "topic-1"}
    assert image.resolve(r"a\.b") == {"a.b"}
    assert image.resolve("") == frozenset()
    for bad in ("(a", r"(a)\1", "(?=a)"):
        try:
            compile_regex(bad)
        except ValueError:
            continue
        raise AssertionError(f"{bad!r} compiled")


# ---- ConsumerGroupDescribe ---------------------------------------------------------------------------


def test_consumer_group_describe() -> None:
    h = ConsumerHarness({"foo": 2})
    h.cjoin("a", instance_id="i", rack_id="r1", regex="", client_id="cid")
    h.cjoin("b", names=("foo",), regex="^f.*")
    h.stable_group("classic", 1)
    response = h.describe_consumer("g", "missing", "classic", "")
    g, missing, classic, empty = response.groups
    assert (g.error_code, g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name) == (
        OK, "Reconciling", 2, 2, "uniform",
    )
    a = next(m for m in g.members if m.member_id == "a")
    assert (a.instance_id, a.rack_id, a.client_id, a.client_host, a.member_epoch) == ("i", "r1", "cid", "/127.0.0.1", 1)
    assert (a.subscribed_topic_names, a.subscribed_topic_regex, a.member_type) == (("foo",), "", 1)
    assert [(t.topic_name, t.partitions) for t in a.assignment] == [("foo", (0, 1))]
    assert len(a.target_assignment[0].partitions) == 1
    b = next(m for m in g.members if m.member_id == "b")
    assert b.subscribed_topic_regex == "^f.*"
    assert (missing.error_code, missing.error_message) == (E.GROUP_ID_NOT_FOUND, "Group missing not found.")
    assert (classic.error_code, classic.error_message) == (E.GROUP_ID_NOT_FOUND, "Group classic is not a consumer group.")
    assert empty.error_code == E.INVALID_GROUP_ID


# ---- ListGroups, DescribeGroups, DeleteGroups --------------------------------------------------------


def test_list_groups_with_types_and_states() -> None:
    h = ConsumerHarness({"foo": 2})
    h.cjoin("a")
    h.stable_group("classic", 1)
    listed = {(g.group_id, g.protocol_type, g.group_state, g.group_type) for g in h.list_groups().groups}
    assert listed == {("g", "consumer", "Stable", "consumer"), ("classic", "consumer", "Stable", "classic")}
    assert [g.group_id for g in h.list_groups(types=("Consumer",)).groups] == ["g"]
    assert [g.group_id for g in h.list_groups(types=("classic",)).groups] == ["classic"]
    assert [g.group_id for g in h.list_groups(types=("bogus",)).groups] == []
    h.cjoin("b")
    assert [g.group_id for g in h.list_groups(states=("reconciling",), types=("consumer",)).groups] == ["g"]
    assert h.shard.groups_by_state_and_type() == {("Reconciling", "consumer"): 1, ("Stable", "classic"): 1}


def test_describe_groups_says_dead_for_consumer_groups() -> None:
    h = ConsumerHarness({"foo": 2})
    h.cjoin("a")
    (described,) = h.describe("g").groups
    assert (described.group_state, described.exists) == ("Dead", False)


def test_delete_groups() -> None:
    h = ConsumerHarness({"foo": 2})
    h.cjoin("a")
    h.commit("g", {("foo", 0): 5}, generation_id=1, member_id="a")
    (busy,) = h.delete_groups("g").results
    assert busy.error_code == E.NON_EMPTY_GROUP
    h.cgh("a", -1)
    (done,) = h.delete_groups("g").results
    assert done.error_code == OK
    assert h.shard.group("g") is None
    assert h.fetch("g", {"foo": (0,)}).topics[0].partitions[0].committed_offset == -1
    assert h.events_of(GroupDeleted)[-1].group_type == "consumer"
    # A deleted group can be created again from scratch.
    assert h.cjoin("a").member_epoch == 1


# ---- offsets -------------------------------------------------------------------------------------------


def test_offsets_of_unsubscribed_topics_expire_and_an_empty_group_goes() -> None:
    config = GroupConfig(offsets_retention_ms=60_000, offsets_retention_check_interval_ms=10_000)
    h = ConsumerHarness({"foo": 1, "old": 1}, config)
    h.cjoin("a")
    h.commit("g", {("foo", 0): 1, ("old", 0): 2}, generation_id=1, member_id="a")
    for _ in range(7):
        h.advance(10_000)
        h.cgh("a", 1)
    kept = h.fetch("g")
    assert {t.name for t in kept.topics} == {"foo"}  # subscribed topics never expire
    h.cgh("a", -1)
    h.advance(70_000)
    assert h.shard.group("g") is None
    assert h.events_of(GroupDeleted)[-1].reason == "expired"
