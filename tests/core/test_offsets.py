"""OffsetCommit, OffsetFetch, OffsetDelete, retention expiry and removal of empty groups."""

from __future__ import annotations

from coordinator.core.config import GroupConfig
from coordinator.core.consumer_protocol import encode_subscription
from coordinator.core.errors import ErrorCode
from coordinator.core.events import GroupDeleted, OffsetsCommitted
from coordinator.core.records import GroupMetadataKey, OffsetCommitKey, OffsetCommitValue, Record
from coordinator.core.requests import OffsetFetch, OffsetFetchGroup, OffsetFetchTopic
from tests.core.harness import Harness

OK = ErrorCode.NONE
DAY = 24 * 3600 * 1000
SUB_T = (("range", encode_subscription(["t"])),)


def _errors(response: object) -> dict[tuple[str, int], ErrorCode]:
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}  # type: ignore[attr-defined]


def test_simple_consumer_commit_creates_a_simple_group_through_replay() -> None:
    h = Harness()
    ref = h.commit("simple", {("t", 0): 10, ("t", 1): 11, ("u", 0): 5}, metadata="m")
    assert _errors(h.reply(ref)) == {("t", 0): OK, ("t", 1): OK, ("u", 0): OK}
    assert [r.key for r in h.records] == [
        OffsetCommitKey("simple", "t", 0),
        OffsetCommitKey("simple", "t", 1),
        OffsetCommitKey("simple", "u", 0),
    ]
    assert h.records[0].value == OffsetCommitValue(10, -1, "m", h.now, -1)
    group = h.group("simple")
    assert (group.state_name, group.protocol_type) == ("Empty", None)
    assert h.events_of(OffsetsCommitted) == [OffsetsCommitted("simple", 3)]
    fetched = h.fetch("simple", {"t": (0, 1, 2)})
    assert [(p.partition_index, p.committed_offset, p.metadata) for p in fetched.topics[0].partitions] == [
        (0, 10, "m"),
        (1, 11, "m"),
        (2, -1, ""),
    ]


def test_commit_by_group_members() -> None:
    h = Harness()
    (_leader, follower), gen = h.stable_group("g", 2)
    assert _errors(h.reply(h.commit("g", generation_id=gen, member_id=follower))) == {("t", 0): OK}
    assert _errors(h.reply(h.commit("g", generation_id=gen + 1, member_id=follower))) == {
        ("t", 0): ErrorCode.ILLEGAL_GENERATION
    }
    assert _errors(h.reply(h.commit("g", generation_id=gen, member_id="x"))) == {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}
    # No member information while the group has members: only allowed when Empty.
    assert _errors(h.reply(h.commit("g"))) == {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}


def test_commit_keeps_the_session_alive_in_stable_and_preparing_rebalance() -> None:
    h = Harness()
    (leader, follower), gen = h.stable_group("g", 2)
    h.advance(9_000)
    h.heartbeat("g", leader, gen)
    h.commit("g", generation_id=gen, member_id=follower)
    assert h.timers[("classic-heartbeat", "g", follower)] == h.now + 10_000


def test_commit_in_preparing_rebalance_uses_the_previous_generation() -> None:
    h = Harness()
    (leader, follower), gen = h.stable_group("g", 2)
    h.join("g", leader)
    assert h.state("g") == "PreparingRebalance"
    assert _errors(h.reply(h.commit("g", generation_id=gen, member_id=follower))) == {("t", 0): OK}


def test_commit_in_completing_rebalance_is_rebalance_in_progress() -> None:
    h = Harness()
    ids = [h.join_new("g", client_id=f"c{i}")[1] for i in range(2)]
    h.advance(0)
    errors = _errors(h.reply(h.commit("g", generation_id=1, member_id=ids[1])))
    assert errors == {("t", 0): ErrorCode.REBALANCE_IN_PROGRESS}


def test_commit_errors_for_absent_and_dead_groups() -> None:
    h = Harness()
    # v9+ answer; adapters turn it into ILLEGAL_GENERATION below v9.
    assert _errors(h.reply(h.commit("nope", generation_id=1, member_id="m"))) == {
        ("t", 0): ErrorCode.GROUP_ID_NOT_FOUND
    }
    assert h.state("nope") == "absent"
    h.stable_group("g", 1)
    h._absorb(h.shard.on_unloaded(h.now))
    assert _errors(h.reply(h.commit("g", generation_id=1, member_id="m"))) == {
        ("t", 0): ErrorCode.COORDINATOR_NOT_AVAILABLE
    }


def test_metadata_too_large_is_per_partition() -> None:
    h = Harness(GroupConfig(offset_metadata_max_bytes=4))
    ref = h.commit("g", {("t", 0): 1}, metadata="12345")
    assert _errors(h.reply(ref)) == {("t", 0): ErrorCode.OFFSET_METADATA_TOO_LARGE}
    assert h.records == [] and h.state("g") == "absent"
    assert _errors(h.reply(h.commit("g", {("t", 0): 1}, metadata="1234"))) == {("t", 0): OK}



def test_metadata_is_measured_in_utf16_units_as_kafka_measures_it() -> None:
    """Characters outside the BMP count twice (Java's String.length()): with a limit of 5, two
    emoji (4 units) and two emoji and a letter (5) fit, three emoji (6 units, 3 characters) do not."""
    h = Harness(GroupConfig(offset_metadata_max_bytes=5))
    for metadata, expected in (("\U0001F600" * 2, OK), ("\U0001F600" * 2 + "a", OK),
                               ("\U0001F600" * 3, ErrorCode.OFFSET_METADATA_TOO_LARGE)):
        assert _errors(h.reply(h.commit("g", {("t", 0): 1}, metadata=metadata))) == {("t", 0): expected}, metadata

def test_fetch_all_and_absent_groups() -> None:
    h = Harness()
    h.commit("g", {("t", 0): 1, ("u", 3): 7})
    everything = h.fetch("g")
    assert {(t.name, p.partition_index, p.committed_offset) for t in everything.topics for p in t.partitions} == {
        ("t", 0, 1),
        ("u", 3, 7),
    }
    assert h.fetch("absent").topics == ()
    absent = h.fetch("absent", {"t": (0,)})
    assert (absent.error_code, absent.topics[0].partitions[0].committed_offset) == (OK, -1)


def test_fetch_is_batched_over_groups() -> None:
    h = Harness()
    h.commit("a", {("t", 0): 1})
    h.commit("b", {("t", 0): 2})
    ref = h.next_ref()
    h.send(
        OffsetFetch(
            ref,
            (OffsetFetchGroup("a", topics=(OffsetFetchTopic("t", (0,)),)), OffsetFetchGroup("b"), OffsetFetchGroup("c")),
        )
    )
    groups = h.reply(ref).groups
    assert [g.group_id for g in groups] == ["a", "b", "c"]
    assert groups[0].topics[0].partitions[0].committed_offset == 1
    assert groups[1].topics[0].partitions[0].committed_offset == 2
    assert groups[2].topics == ()


def test_offset_delete() -> None:
    h = Harness()
    (leader, _follower), gen = h.stable_group("g", 2, protocols=SUB_T)
    h.commit("g", {("t", 0): 1, ("u", 0): 2}, generation_id=gen, member_id=leader)
    response = h.delete_offsets("g", {"t": (0,), "u": (0, 1)})
    assert response.error_code == OK
    assert _errors(response) == {("t", 0): ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, ("u", 0): OK, ("u", 1): OK}
    assert h.records[-1] == Record(OffsetCommitKey("g", "u", 0), None)  # only existing offsets get tombstones
    assert h.shard.committed_offset("g", "u", 0) is None
    assert h.shard.committed_offset("g", "t", 0) is not None


def test_offset_delete_errors() -> None:
    h = Harness()
    assert h.delete_offsets("", {"t": (0,)}).error_code == ErrorCode.INVALID_GROUP_ID
    assert h.delete_offsets("nope", {"t": (0,)}).error_code == ErrorCode.GROUP_ID_NOT_FOUND
    h.stable_group("g", 1, protocol_type="connect")
    assert h.delete_offsets("g", {"t": (0,)}).error_code == ErrorCode.NON_EMPTY_GROUP


def test_simple_group_offsets_expire_by_commit_time_then_the_group_goes() -> None:
    h = Harness()
    h.commit("simple", {("t", 0): 1})
    h.advance(3 * DAY)
    h.commit("simple", {("t", 1): 1})
    h.advance(4 * DAY)  # t-0 is 7 days old at the first scan after that
    assert h.shard.committed_offset("simple", "t", 0) is None
    assert h.shard.committed_offset("simple", "t", 1) is not None
    h.advance(3 * DAY + 600_000)
    assert h.state("simple") == "absent"
    assert h.events_of(GroupDeleted) == [GroupDeleted("simple", "classic", "expired")]
    assert h.records[-1] == Record(GroupMetadataKey("simple"), None)


def test_empty_group_offsets_expire_from_when_it_became_empty() -> None:
    h = Harness(GroupConfig(group_initial_rebalance_delay_ms=0, group_max_session_timeout_ms=30 * DAY))
    (member,), gen = h.stable_group("g", 1, protocols=SUB_T, session_timeout_ms=3 * DAY)
    h.commit("g", {("t", 0): 1}, generation_id=gen, member_id=member)
    h.advance(8 * DAY)  # the silent member expired after 3 days
    group_empty_since = h.group("g").state_timestamp_ms
    assert h.state("g") == "Empty" and group_empty_since is not None
    assert h.shard.committed_offset("g", "t", 0) is not None  # committed 8 days ago, empty for less
    h.advance(group_empty_since + 7 * DAY + 600_000 - h.now)
    assert h.state("g") == "absent"


def test_stable_consumer_group_expires_only_unsubscribed_topics() -> None:
    h = Harness(GroupConfig(group_initial_rebalance_delay_ms=0, group_max_session_timeout_ms=30 * DAY))
    (member,), gen = h.stable_group("g", 1, protocols=SUB_T, session_timeout_ms=20 * DAY)
    h.commit("g", {("t", 0): 1, ("old", 0): 1}, generation_id=gen, member_id=member)
    h.advance(8 * DAY)
    assert h.shard.committed_offset("g", "old", 0) is None
    assert h.shard.committed_offset("g", "t", 0) is not None
    assert h.state("g") == "Stable"


def test_explicit_retention_from_old_commit_versions() -> None:
    h = Harness()
    h.commit("simple", {("t", 0): 1}, retention_time_ms=1_000)
    assert h.records[-1].value == OffsetCommitValue(1, -1, "", h.now, h.now + 1_000)
    h.advance(600_000)
    assert h.state("simple") == "absent"


def test_empty_groups_without_offsets_are_removed_at_the_next_scan() -> None:
    h = Harness()
    (member,), _ = h.stable_group("g", 1)
    h.leave("g", member)
    assert h.state("g") == "Empty"
    h.advance(600_000)
    assert h.state("g") == "absent"
    assert h.timers[("offsets-expiration",)] == h.now + 600_000
