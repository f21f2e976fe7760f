"""The transition table and the per-state error table against Kafka's (reference classic.md §2.2)."""

from __future__ import annotations

import itertools

import pytest

from coordinator.core.classic.state import (
    COMPLETING_REBALANCE,
    DEAD,
    EMPTY,
    PREPARING_REBALANCE,
    STABLE,
    STATE_ERRORS,
    Api,
    Check,
    ClassicGroupState,
    can_rebalance,
    can_transition,
    state_error,
)
from coordinator.core.errors import ErrorCode

LEGAL = {
    (PREPARING_REBALANCE, EMPTY),
    (STABLE, PREPARING_REBALANCE),
    (COMPLETING_REBALANCE, PREPARING_REBALANCE),
    (EMPTY, PREPARING_REBALANCE),
    (PREPARING_REBALANCE, COMPLETING_REBALANCE),
    (COMPLETING_REBALANCE, STABLE),
} | {(s, DEAD) for s in ClassicGroupState}


@pytest.mark.parametrize(("current", "target"), list(itertools.product(ClassicGroupState, repeat=2)))
def test_transition_table(current: ClassicGroupState, target: ClassicGroupState) -> None:
    assert can_transition(current, target) == ((current, target) in LEGAL)


def test_no_direct_stable_to_empty() -> None:
    assert not can_transition(STABLE, EMPTY)


def test_can_rebalance_states() -> None:
    assert {s for s in ClassicGroupState if can_rebalance(s)} == {EMPTY, STABLE, COMPLETING_REBALANCE}


B, A = Check.BEFORE_MEMBER, Check.AFTER_MEMBER
EXPECTED = {
    (Api.JOIN_NEW_MEMBER, DEAD, B): ErrorCode.COORDINATOR_NOT_AVAILABLE,
    (Api.JOIN_EXISTING_MEMBER, DEAD, B): ErrorCode.COORDINATOR_NOT_AVAILABLE,
    (Api.JOIN_EXISTING_MEMBER, EMPTY, A): ErrorCode.UNKNOWN_MEMBER_ID,
    (Api.SYNC, EMPTY, B): ErrorCode.UNKNOWN_MEMBER_ID,
    (Api.SYNC, DEAD, B): ErrorCode.COORDINATOR_NOT_AVAILABLE,
    (Api.SYNC, PREPARING_REBALANCE, A): ErrorCode.REBALANCE_IN_PROGRESS,
    (Api.HEARTBEAT, DEAD, B): ErrorCode.COORDINATOR_NOT_AVAILABLE,
    (Api.HEARTBEAT, EMPTY, A): ErrorCode.UNKNOWN_MEMBER_ID,
    (Api.HEARTBEAT, PREPARING_REBALANCE, A): ErrorCode.REBALANCE_IN_PROGRESS,
    (Api.LEAVE, DEAD, B): ErrorCode.COORDINATOR_NOT_AVAILABLE,
    (Api.OFFSET_COMMIT, DEAD, B): ErrorCode.COORDINATOR_NOT_AVAILABLE,
    (Api.OFFSET_COMMIT, COMPLETING_REBALANCE, A): ErrorCode.REBALANCE_IN_PROGRESS,
    (Api.OFFSET_DELETE, DEAD, B): ErrorCode.GROUP_ID_NOT_FOUND,
    (Api.DELETE_GROUP, DEAD, B): ErrorCode.GROUP_ID_NOT_FOUND,
} | {
    (api, s, B): ErrorCode.NON_EMPTY_GROUP
    for api in (Api.OFFSET_DELETE, Api.DELETE_GROUP)
    for s in (PREPARING_REBALANCE, COMPLETING_REBALANCE, STABLE)
}


@pytest.mark.parametrize(
    ("api", "state", "check"), list(itertools.product(Api, ClassicGroupState, Check))
)
def test_error_table(api: Api, state: ClassicGroupState, check: Check) -> None:
    assert state_error(api, state, check) == EXPECTED.get((api, state, check))


def test_error_table_has_every_api() -> None:
    assert set(STATE_ERRORS) == set(Api)
