"""Offset commits of streams members: the member's epoch passes, an older one per task (assigned or
pending revocation, not before the epoch it was granted at), zombies and old versions refused."""

from __future__ import annotations

import pytest

from coordinator.core.errors import CoordinatorError, ErrorCode
from coordinator.core.streams.member import StreamsGroupMember
from coordinator.core.streams.offsets import (
    validate_delete_group,
    validate_offset_commit,
    validate_offset_fetch,
)
from coordinator.core.streams.records import StreamsGroupTopologyValue, Subtopology, TopicInfo
from coordinator.core.streams.tasks import TasksWithEpochs

TOPOLOGY = StreamsGroupTopologyValue(0, (
    Subtopology("0", source_topics=("words",), repartition_sink_topics=("rep",)),
    Subtopology("1", repartition_source_topics=(TopicInfo("rep"),)),
))
MEMBER = StreamsGroupMember(member_id="a", process_id="p", member_epoch=7, previous_member_epoch=6,
                            assigned=TasksWithEpochs({("0", 0): 5, ("1", 2): 7}),
                            pending_revocation=TasksWithEpochs({("0", 1): 3}))
MEMBERS = {"a": MEMBER}


def commit(epoch: int, member_id: str = "a", *, transactional: bool = False, version: int = 9) -> object:
    return validate_offset_commit("app", MEMBERS, TOPOLOGY, member_id, None, epoch, transactional, version)


def code_of(call: object) -> ErrorCode:
    assert callable(call)
    with pytest.raises(CoordinatorError) as refused:
        call()
    return refused.value.code


def test_the_members_epoch_commits_anything_and_a_newer_one_is_stale() -> None:
    assert commit(7) is None
    assert code_of(lambda: commit(8)) == ErrorCode.STALE_MEMBER_EPOCH


def test_an_older_epoch_commits_only_tasks_held_since_then_including_those_being_revoked() -> None:
    validator = commit(5)
    assert callable(validator)
    validator("words", 0)  # granted at 5
    validator("words", 1)  # pending revocation, granted at 3: the member commits before it lets go
    assert code_of(lambda: validator("rep", 2)) == ErrorCode.STALE_MEMBER_EPOCH  # granted at 7 > 5
    assert code_of(lambda: validator("words", 3)) == ErrorCode.STALE_MEMBER_EPOCH  # not its task
    assert code_of(lambda: validator("other", 0)) == ErrorCode.STALE_MEMBER_EPOCH  # not in the topology


def test_unknown_members_old_versions_and_admin_commits() -> None:
    assert code_of(lambda: commit(7, "zombie")) == ErrorCode.UNKNOWN_MEMBER_ID
    assert code_of(lambda: commit(7, version=8)) == ErrorCode.UNSUPPORTED_VERSION
    assert commit(7, transactional=True, version=3) is None
    assert validate_offset_commit("app", {}, TOPOLOGY, "", None, -1, False, 2) is None  # admin, empty group
    assert validate_offset_commit("app", MEMBERS, TOPOLOGY, "", None, -1, True, 3) is None  # EOS producer


def test_fetches_and_deletes() -> None:
    validate_offset_fetch("app", MEMBERS, None, -1)
    validate_offset_fetch("app", MEMBERS, "a", 7)
    assert code_of(lambda: validate_offset_fetch("app", MEMBERS, "a", 6)) == ErrorCode.STALE_MEMBER_EPOCH
    assert code_of(lambda: validate_offset_fetch("app", MEMBERS, "b", 7)) == ErrorCode.UNKNOWN_MEMBER_ID
    validate_delete_group("Empty")
    assert code_of(lambda: validate_delete_group("Stable")) == ErrorCode.NON_EMPTY_GROUP
