"""The log partitions' assignor: no partition ever has two owners, what is owned stays where it can,
and any change settles, balanced, within two rounds."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from coordinator.clusterlog.assignor import Report, assign


def rounds(reports: list[Report], partitions: int, count: int) -> list[Report]:
    """`count` rebalances in which every instance reports what the previous one gave it."""
    for generation in range(count):
        result = assign(reports, partitions)
        reports = [Report(r.member_id, r.node_id, result[r.member_id], generation) for r in reports]
    return reports


def balanced(reports: list[Report], partitions: int) -> bool:
    sizes = [len(r.owned) for r in reports]
    union = set().union(*(r.owned for r in reports))
    return union == set(range(partitions)) and max(sizes) - min(sizes) <= 1


@st.composite
def situations(draw):
    partitions = draw(st.integers(1, 60))
    members = draw(st.integers(1, 12))
    reports = []
    for i in range(members):
        owned = draw(st.frozensets(st.integers(0, partitions - 1), max_size=partitions))
        reports.append(Report(f"m{i:02d}", i + 1, owned, draw(st.integers(-1, 5))))
    return reports, partitions


@given(situations())
def test_no_partition_has_two_owners_and_none_moves_while_another_may_serve_it(situation) -> None:
    reports, partitions = situation
    result = assign(reports, partitions)
    seen: set[int] = set()
    for report in reports:
        mine = result[report.member_id]
        assert not mine & seen
        seen |= mine
        # Cooperative: a partition goes to a new owner only if nobody claims it today.
        claimed_by_others = set().union(*(r.owned for r in reports if r is not report))
        assert not (mine - report.owned) & claimed_by_others


@given(situations())
def test_any_situation_settles_balanced_within_two_rounds_and_then_stays(situation) -> None:
    reports, partitions = situation
    settled = rounds(reports, partitions, 2)
    assert balanced(settled, partitions)
    assert rounds(settled, partitions, 1) == [
        Report(r.member_id, r.node_id, r.owned, 0) for r in settled]  # nothing moves any more


@given(st.integers(1, 60), st.integers(1, 10))
def test_a_new_instance_takes_partitions_without_any_other_instance_gaining_one(partitions: int, members: int) -> None:
    reports = rounds([Report(f"m{i}", i, frozenset(), -1) for i in range(members)], partitions, 2)
    before = {r.member_id: r.owned for r in reports}
    grown = rounds([*reports, Report("new", 99, frozenset(), -1)], partitions, 2)
    assert balanced(grown, partitions)
    for report in grown:
        if report.member_id != "new":
            assert report.owned <= before[report.member_id]  # sticky: the old ones only give


def test_the_same_reports_in_any_order_give_the_same_assignment() -> None:
    reports = [Report("b", 2, frozenset({0, 1, 2}), 3), Report("a", 1, frozenset({2, 3}), 4), Report("c", 3, frozenset(), -1)]
    assert assign(reports, 6) == assign(list(reversed(reports)), 6)
    assert assign(reports, 6)["a"] >= {2}  # the newer claim of partition 2 wins
