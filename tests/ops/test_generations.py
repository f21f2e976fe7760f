"""When the generations the private DescribeGroupGenerations answered belong to the members that
DescribeGroups, asked in between, saw: only if nothing moved the group's generation or state."""

from __future__ import annotations

import pytest

from coordinator.admin.generations import Generations, held_throughout

BEFORE = Generations("Stable", 4, {"a": 4, "b": 4})


def test_the_same_generation_and_state_on_both_sides_is_what_describe_groups_saw() -> None:
    after = Generations("Stable", 4, {"a": 4, "b": 4})
    assert held_throughout(BEFORE, after, "Stable") is after


@pytest.mark.parametrize(("after", "state"), [
    (Generations("Stable", 5, {"a": 5, "b": 5}), "Stable"),  # a whole rebalance in between
    (Generations("PreparingRebalance", 4, {"a": 4, "b": 4, "c": -1}), "Stable"),  # one begun after
    (Generations("Stable", 4, {"a": 4, "b": 4}), "PreparingRebalance"),  # DescribeGroups saw another state
    (None, "Stable"),  # the second answer did not come
])
def test_anything_moved_in_between_shows_no_generation(after: Generations | None, state: str) -> None:
    assert held_throughout(BEFORE, after, state) is None
