"""ListGroups, DescribeGroups, DeleteGroups."""

from __future__ import annotations

from coordinator.core.errors import ErrorCode
from coordinator.core.events import GroupDeleted
from coordinator.core.records import GroupMetadataKey, OffsetCommitKey, Record
from tests.core.harness import Harness

OK = ErrorCode.NONE


def _setup() -> Harness:
    h = Harness()
    h.stable_group("stable", 2)
    h.join_new("rebalancing")  # parked in PreparingRebalance (initial delay not fired)
    h.commit("simple", {("t", 0): 1})
    return h


def test_list_groups_with_filters() -> None:
    h = _setup()
    listed = {(g.group_id, g.protocol_type, g.group_state, g.group_type) for g in h.list_groups().groups}
    assert listed == {
        ("stable", "consumer", "Stable", "classic"),
        ("rebalancing", "consumer", "PreparingRebalance", "classic"),
        ("simple", "", "Empty", "classic"),
    }
    assert {g.group_id for g in h.list_groups(states=(" stable ", "EMPTY")).groups} == {"stable", "simple"}
    assert {g.group_id for g in h.list_groups(types=("Classic",)).groups} == {"stable", "rebalancing", "simple"}
    assert h.list_groups(types=("consumer",)).groups == ()
    assert h.list_groups(types=("bogus",)).groups == ()
    assert h.list_groups(states=("bogus",)).groups == ()


def test_describe_groups() -> None:
    h = _setup()
    stable, rebalancing, unknown = h.describe("stable", "rebalancing", "unknown").groups
    assert (stable.error_code, stable.group_state, stable.protocol_type, stable.protocol_data) == (
        OK,
        "Stable",
        "consumer",
        "range",
    )
    assert [m.member_metadata for m in stable.members] == [b"r", b"r"]
    assert all(m.member_assignment == f"assign-{m.member_id}".encode() for m in stable.members)
    assert all(m.client_host == "/127.0.0.1" for m in stable.members)
    assert (rebalancing.group_state, rebalancing.protocol_data) == ("PreparingRebalance", "")
    assert [m.member_metadata for m in rebalancing.members] == [b""]
    assert (unknown.error_code, unknown.group_state, unknown.exists) == (OK, "Dead", False)
    assert unknown.not_found_message == "Group unknown not found."


def test_describe_static_member_carries_its_instance_id() -> None:
    h = Harness()
    h.join("g", instance_id="i0")
    (group,) = h.describe("g").groups
    assert [m.group_instance_id for m in group.members] == ["i0"]


def test_delete_groups() -> None:
    h = _setup()
    h.commit("emptied", {("t", 0): 1, ("t", 1): 2})
    response = h.delete_groups("stable", "rebalancing", "simple", "nope", "simple", "emptied")
    assert [(r.group_id, r.error_code) for r in response.results] == [
        ("stable", ErrorCode.NON_EMPTY_GROUP),
        ("rebalancing", ErrorCode.NON_EMPTY_GROUP),
        ("simple", OK),
        ("nope", ErrorCode.GROUP_ID_NOT_FOUND),
        ("emptied", OK),
    ]
    # Offsets first, then the group, per group.
    assert h.results[-1].records == [
        Record(OffsetCommitKey("simple", "t", 0), None),
        Record(GroupMetadataKey("simple"), None),
        Record(OffsetCommitKey("emptied", "t", 0), None),
        Record(OffsetCommitKey("emptied", "t", 1), None),
        Record(GroupMetadataKey("emptied"), None),
    ]
    assert h.state("simple") == h.state("emptied") == "absent"
    assert h.fetch("emptied").topics == ()
    assert GroupDeleted("simple", "classic", "delete-groups") in h.events


def test_delete_dead_group_is_not_found() -> None:
    h = Harness()
    h.stable_group("g", 1)
    h._absorb(h.shard.on_unloaded(h.now))
    assert h.delete_groups("g").results[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND
