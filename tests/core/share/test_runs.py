"""A batch's runs: overlaying new states gives what setting them offset by offset gives, in the one
canonical form (neighbours never equal), and clipping keeps what is in range."""

from __future__ import annotations

from itertools import pairwise

from hypothesis import given
from hypothesis import strategies as st

from coordinator.core.share.records import StateRun
from coordinator.core.share.runs import (
    ACKNOWLEDGED,
    ACQUIRED,
    AVAILABLE,
    canonical,
    clip,
    overlay,
    run_index,
)

STATES = st.sampled_from([(AVAILABLE, 1, "", -1), (ACQUIRED, 1, "a", 5), (ACQUIRED, 2, "a", 5),
                          (ACQUIRED, 1, "b", 5), (ACKNOWLEDGED, 1, "", -1)])


def runs_of(cuts: list[int], states: list[tuple[int, int, str, int]], first: int = 0) -> list[StateRun]:
    """Runs from ``first`` with the given lengths and states (neighbours may be equal)."""
    out, at = [], first
    for length, state in zip(cuts, states, strict=False):
        out.append(StateRun(at, at + length - 1, *state))
        at += length
    return out


def per_offset(runs: list[StateRun]) -> dict[int, tuple[int, int, str, int]]:
    return {o: (r.state, r.delivery_count, r.member_id, r.lock_deadline) for r in runs for o in range(r.first, r.last + 1)}


def assert_canonical(runs: list[StateRun]) -> None:
    for a, b in pairwise(runs):
        assert a.last < b.first
        assert a.last + 1 < b.first or per_offset([a])[a.last] != per_offset([b])[b.first], (a, b)


@given(st.lists(st.integers(1, 6), min_size=1, max_size=8), st.lists(STATES, min_size=8, max_size=8),
       st.lists(st.tuples(st.integers(0, 50), st.integers(1, 6), STATES), max_size=6))
def test_overlay_sets_each_offset_as_a_walk_would(cuts: list[int], states: list[tuple[int, int, str, int]],
                                                  changes: list[tuple[int, int, tuple[int, int, str, int]]]) -> None:
    runs = canonical(runs_of(cuts, states))
    new, at = [], -1
    for start, length, state in sorted(changes):
        first = max(start, at + 1)
        new.append(StateRun(first, first + length - 1, *state))
        at = first + length - 1
    expected = per_offset(runs) | per_offset(new)
    got = overlay(runs, new)
    assert per_offset(got) == expected
    assert_canonical(got)


def test_equal_neighbours_merge_and_a_canonical_list_is_returned_as_is() -> None:
    split = [StateRun(0, 2, ACQUIRED, 1, "a", 5), StateRun(3, 9, ACQUIRED, 1, "a", 5), StateRun(10, 10, AVAILABLE, 1)]
    merged = canonical(split)
    assert merged == [StateRun(0, 9, ACQUIRED, 1, "a", 5), StateRun(10, 10, AVAILABLE, 1)]
    assert canonical(merged) is merged


def test_accepting_a_whole_acquisition_is_one_run_for_one() -> None:
    acquired = [StateRun(100, 599, ACQUIRED, 1, "a", 5)]
    accepted = [StateRun(100, 599, ACKNOWLEDGED, 1)]
    assert overlay(acquired, accepted) is accepted


def test_clipping_cuts_the_runs_at_the_bounds() -> None:
    runs = [StateRun(0, 4, ACKNOWLEDGED, 1), StateRun(5, 9, ACQUIRED, 1, "a", 5)]
    assert clip(runs, 0) is runs
    assert clip(runs, 3) == [StateRun(3, 4, ACKNOWLEDGED, 1), StateRun(5, 9, ACQUIRED, 1, "a", 5)]
    assert clip(runs, 5, 7) == [StateRun(5, 7, ACQUIRED, 1, "a", 5)]
    assert clip(runs, 10) == []
    assert [run_index(runs, o) for o in (0, 4, 5, 9, 10)] == [0, 0, 1, 1, 2]
