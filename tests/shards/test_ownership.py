"""The NOT_COORDINATOR checks are derived from what each API declares about its groups: every group
API of a node gets the check its placement says, and an API that names no group gets none."""

from __future__ import annotations

from typing import Any

from coordinator.api.decision import Answered, Filtered
from coordinator.api.placement import LocalGroups, NoGroup
from coordinator.api.registry import RequestContext
from coordinator.runtime.apis import group_handlers
from coordinator.shards.ownership import placement_checks
from protocol.build import build
from protocol.errors import ErrorCode
from protocol.schemas import request_schema

OURS, THEIRS = "ours", "theirs"


def owns(group_id: str) -> bool:
    return group_id == OURS


def ctx(api_key: int, version: int) -> RequestContext:
    return RequestContext(1, "client", "127.0.0.1", api_key, version, 7)


def request(api_key: int, version: int, fields: dict[str, Any]) -> Any:
    return build(request_schema(api_key, version), fields)


DECLARED = group_handlers(lambda: None)
CHECKS = placement_checks(DECLARED, owns)


def test_every_group_api_that_names_groups_has_a_check_and_only_those() -> None:
    named = {d.api_key for d in DECLARED if not isinstance(d.placement, (NoGroup, LocalGroups))}
    assert set(CHECKS) == named
    assert 16 not in CHECKS  # ListGroups lists this node's groups: nothing to refuse
    assert {11, 12, 13, 14, 8, 9, 47, 15, 42, 68, 69} <= named


def test_a_single_group_request_for_another_nodes_group_is_refused_whole() -> None:
    heartbeat = CHECKS[12]
    theirs = request(12, 4, {"group_id": THEIRS, "generation_id": 1, "member_id": "m"})
    ours = request(12, 4, {"group_id": OURS, "generation_id": 1, "member_id": "m"})
    assert heartbeat(ctx(12, 4), theirs) == ErrorCode.NOT_COORDINATOR
    assert heartbeat(ctx(12, 4), ours) is None
    empty = request(12, 4, {"group_id": "", "generation_id": 1, "member_id": "m"})
    assert heartbeat(ctx(12, 4), empty) is None  # the core answers INVALID_GROUP_ID, as Kafka does first


def test_a_many_group_request_serves_ours_and_refuses_the_others_per_group() -> None:
    describe = CHECKS[15]
    decision = describe(ctx(15, 5), request(15, 5, {"groups": [OURS, THEIRS]}))
    assert isinstance(decision, Filtered)
    assert list(decision.request.groups) == [OURS]
    merged = decision.merge({"throttle_time": 0, "groups": [{"group_id": OURS, "error_code": 0}]})
    assert [(g["group_id"], g["error_code"]) for g in merged["groups"]] == [
        (OURS, 0), (THEIRS, ErrorCode.NOT_COORDINATOR)]
    only_theirs = describe(ctx(15, 5), request(15, 5, {"groups": [THEIRS]}))
    assert isinstance(only_theirs, Answered)


def test_offset_fetch_places_by_its_version() -> None:
    fetch = CHECKS[9]
    old = request(9, 7, {"group_id": THEIRS, "topics": None})
    assert fetch(ctx(9, 7), old) == ErrorCode.NOT_COORDINATOR
    batched = request(9, 8, {"groups": [{"group_id": THEIRS, "topics": None}, {"group_id": OURS, "topics": None}]})
    decision = fetch(ctx(9, 8), batched)
    assert isinstance(decision, Filtered) and [g.group_id for g in decision.request.groups] == [OURS]


def test_a_group_being_loaded_is_refused_with_the_code_the_owner_gives() -> None:
    """The cluster log's owner refuses a group whose partition it has been given but not yet loaded
    with COORDINATOR_LOAD_IN_PROGRESS (Kafka's loading partition), another instance's NOT_COORDINATOR."""
    loading = "loading"

    def refusal(group_id: str) -> int:
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if group_id == loading else ErrorCode.NOT_COORDINATOR

    checks = placement_checks(DECLARED, owns, refusal)
    commit = request(8, 9, {"group_id": loading, "generation_id_or_member_epoch": -1, "member_id": "",
                            "group_instance_id": None, "topics": []})
    assert checks[8](ctx(8, 9), commit) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    describe = checks[15](ctx(15, 5), request(15, 5, {"groups": [OURS, loading, THEIRS]}))
    assert isinstance(describe, Filtered)
    merged = describe.merge({"throttle_time": 0, "groups": [{"group_id": OURS, "error_code": 0}]})
    assert [(g["group_id"], g["error_code"]) for g in merged["groups"]] == [
        (OURS, 0), (loading, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS), (THEIRS, ErrorCode.NOT_COORDINATOR)]
