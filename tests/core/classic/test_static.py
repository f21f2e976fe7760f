"""Static membership (KIP-345, KIP-814): replacement, fencing, rejoin without rebalance."""

from __future__ import annotations

from coordinator.core.consumer_protocol import encode_subscription
from coordinator.core.errors import ErrorCode
from coordinator.core.events import StaticMemberReplaced
from coordinator.core.records import GroupMetadataKey, GroupMetadataValue
from coordinator.core.requests import LeavingMember
from tests.core.harness import Harness

OK = ErrorCode.NONE


def _static_group(h: Harness, n: int = 2, **kwargs: object) -> tuple[list[str], int]:
    """Stable group of static members i0..i(n-1); i0 joins first and leads."""
    refs = [h.join("g", instance_id=f"i{i}", **kwargs) for i in range(n)]  # type: ignore[arg-type]
    h.advance(0)
    ids = [h.reply(r).member_id for r in refs]
    members, gen = h.sync_all("g", ids)
    assert members[0] == ids[0]
    return ids, gen


def test_follower_restart_replaces_its_member_id_without_rebalance() -> None:
    h = Harness()
    (leader, old_follower), gen = _static_group(h)
    ref = h.join("g", instance_id="i1")
    response = h.reply(ref)
    new_follower = response.member_id
    assert new_follower != old_follower
    assert (response.error_code, response.generation_id, response.leader) == (OK, gen, leader)
    assert response.members == () and not response.skip_assignment
    assert h.state("g") == "Stable"
    # Persisted with the new id, assignment inherited.
    assert h.results[-1].records[0].key == GroupMetadataKey("g")
    value = h.records[-1].value
    assert isinstance(value, GroupMetadataValue)
    assert [m.member_id for m in value.members] == [leader, new_follower]
    assert h.reply(h.sync("g", new_follower, gen, instance_id="i1")).assignment == f"assign-{old_follower}".encode()
    assert h.events_of(StaticMemberReplaced) == [StaticMemberReplaced("g", "i1", old_follower, new_follower)]
    # The old incarnation is fenced when it names its instance, unknown otherwise.
    assert h.reply(h.heartbeat("g", old_follower, gen, "i1")).error_code == ErrorCode.FENCED_INSTANCE_ID
    assert h.reply(h.heartbeat("g", old_follower, gen)).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.reply(h.heartbeat("g", new_follower, gen, "i1")).error_code == OK


def test_leader_restart_v9_gets_members_and_skip_assignment() -> None:
    h = Harness()
    (old_leader, follower), _gen = _static_group(h)
    response = h.reply(h.join("g", instance_id="i0"))
    assert response.skip_assignment
    assert response.leader == response.member_id != old_leader
    assert [m.member_id for m in response.members] == [follower, response.member_id]
    assert h.state("g") == "Stable"


def test_leader_restart_before_v9_is_told_the_old_leader_id() -> None:
    h = Harness()
    (old_leader, _), _gen = _static_group(h)
    response = h.reply(h.join("g", instance_id="i0", supports_skip_assignment=False))
    assert response.leader == old_leader != response.member_id
    assert response.members == () and not response.skip_assignment
    assert h.group("g").leader_id == response.member_id


def test_replacement_that_changes_the_selected_protocol_rebalances() -> None:
    h = Harness()
    _, gen = _static_group(h, 1)
    ref = h.join("g", instance_id="i0", protocols=(("roundrobin", b""), ("range", b"")))
    # The sole member is parked, so the rebalance completes at once, with the new protocol.
    response = h.reply(ref)
    assert (response.generation_id, response.protocol_name) == (gen + 1, "roundrobin")
    assert h.state("g") == "CompletingRebalance"


def _range(topics: list[str], **kwargs: object) -> tuple[tuple[str, bytes]]:
    return (("range", encode_subscription(topics, **kwargs)),)  # type: ignore[arg-type]


def test_replacement_that_subscribes_to_more_topics_rebalances() -> None:
    """KAFKA-12759: a follower restarted with a wider subscription (a regex that now matches more
    topics) keeps the selected protocol; without a rebalance the leader would never assign the new
    topics, as it only watches the topics the members subscribed to when it last assigned."""
    h = Harness()
    (leader, old_follower), gen = _static_group(h, protocols=_range(["t0"]))
    new_join = h.join("g", instance_id="i1", protocols=_range(["t0", "t1"]))
    assert h.state("g") == "PreparingRebalance"
    assert h.pending(new_join)  # parked until the leader rejoins
    leader_join = h.join("g", leader, instance_id="i0", protocols=_range(["t0"]))
    response = h.reply(leader_join)
    assert response.generation_id == gen + 1
    follower = h.reply(new_join).member_id
    assert follower != old_follower
    assert {m.member_id: m.metadata for m in response.members}[follower] == _range(["t0", "t1"])[0][1]


def test_replacement_that_subscribes_to_fewer_topics_rebalances() -> None:
    h = Harness()
    (_leader, _follower), gen = _static_group(h, protocols=_range(["t0", "t1"]))
    h.join("g", instance_id="i1", protocols=_range(["t1"]))
    assert h.state("g") == "PreparingRebalance"
    assert h.group("g").generation_id == gen


def test_replacement_with_the_same_topics_and_other_owned_partitions_does_not_rebalance() -> None:
    """What a restarted cooperative member declares besides its topics (owned partitions, generation)
    differs from its predecessor's on every restart: only the topics count, or static membership
    would rebalance on every restart."""
    h = Harness()
    before = _range(["t0", "t1"], version=2, owned={"t0": [0]}, generation_id=1)
    (leader, _follower), gen = _static_group(h, protocols=before)
    response = h.reply(h.join("g", instance_id="i1", protocols=_range(["t1", "t0"], version=2)))
    assert (response.error_code, response.generation_id, response.leader) == (OK, gen, leader)
    assert h.state("g") == "Stable"


def test_replacement_with_an_unreadable_subscription_keeps_kafkas_answer() -> None:
    """Metadata the coordinator cannot read as a consumer subscription (another protocol type, or
    bytes of its own): no rebalance, as Kafka (only the selected protocol counts)."""
    h = Harness()
    (leader, _follower), gen = _static_group(h, protocols=(("range", b"anything"),))
    response = h.reply(h.join("g", instance_id="i1", protocols=(("range", b"something else"),)))
    assert (response.error_code, response.generation_id, response.leader) == (OK, gen, leader)
    assert h.state("g") == "Stable"


def test_replacement_in_completing_rebalance_fences_the_old_sync_and_rebalances() -> None:
    h = Harness()
    refs = [h.join("g", instance_id=f"i{i}") for i in range(2)]
    h.advance(0)
    leader, follower = (h.reply(r).member_id for r in refs)
    parked = h.sync("g", follower, 1, instance_id="i1")
    new_ref = h.join("g", instance_id="i1")
    assert h.reply(parked).error_code == ErrorCode.FENCED_INSTANCE_ID
    assert h.state("g") == "PreparingRebalance"
    assert h.pending(new_ref)
    h.join("g", leader, instance_id="i0")
    assert h.reply(new_ref).generation_id == 2


def test_replacement_in_preparing_rebalance_fences_the_old_join() -> None:
    h = Harness()
    (leader, follower), gen = _static_group(h)
    old_join = h.join("g", leader, instance_id="i0")
    assert h.state("g") == "PreparingRebalance"
    new_join = h.join("g", instance_id="i0")
    assert h.reply(old_join).error_code == ErrorCode.FENCED_INSTANCE_ID
    assert h.pending(new_join)
    h.join("g", follower, instance_id="i1")
    response = h.reply(new_join)
    assert response.generation_id == gen + 1
    assert response.leader == response.member_id  # leadership moved with the slot


def test_identity_errors() -> None:
    h = Harness()
    (_leader, follower), gen = _static_group(h)
    assert h.reply(h.join("g", follower, instance_id="unknown")).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.reply(h.join("g", follower, instance_id="i0")).error_code == ErrorCode.FENCED_INSTANCE_ID
    assert h.reply(h.sync("g", follower, gen, instance_id="i0")).error_code == ErrorCode.FENCED_INSTANCE_ID
    commit = h.reply(h.commit("g", generation_id=gen, member_id=follower, instance_id="i0"))
    assert commit.topics[0].partitions[0].error_code == ErrorCode.FENCED_INSTANCE_ID


def test_static_members_that_do_not_rejoin_keep_their_slot() -> None:
    h = Harness()
    slow = {"session_timeout_ms": 60_000, "rebalance_timeout_ms": 20_000}
    (leader, follower), gen = _static_group(h, **slow)
    ref = h.join("g", leader, instance_id="i0", **slow)
    h.advance(20_000)
    response = h.reply(ref)
    assert response.generation_id == gen + 1
    assert [m.member_id for m in response.members] == [leader, follower]


def test_static_members_expire_on_session_timeout() -> None:
    h = Harness()
    (leader, follower), gen = _static_group(h)
    for _ in range(2):
        h.advance(5_000)
        h.heartbeat("g", leader, gen, "i0")
    assert follower not in h.group("g").members
    assert "i1" not in h.group("g").static_members


def test_admin_removal_by_instance_id() -> None:
    h = Harness()
    (leader, _follower), _ = _static_group(h)
    response = h.reply(h.leave("g", LeavingMember("", "i1"), LeavingMember("", "nobody")))
    assert [m.error_code for m in response.members] == [OK, ErrorCode.UNKNOWN_MEMBER_ID]
    assert list(h.group("g").members) == [leader]
    assert h.state("g") == "PreparingRebalance"
