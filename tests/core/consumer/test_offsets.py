"""A consumer group's checks of OffsetCommit and OffsetFetch (coordinator/core/consumer/offsets.py):
a member commits and fetches at its own epoch, an unknown member or another epoch is refused with
Kafka's error, an admin's commit (no member, epoch -1) only while the group is empty, and a
consumer-protocol member's commit below v9 is UNSUPPORTED_VERSION. Commits at an older epoch
(KIP-1251) are test_assignment_epochs.py's."""

from __future__ import annotations

from coordinator.core.errors import ErrorCode
from coordinator.core.requests import (
    OffsetCommit,
    OffsetCommitPartition,
    OffsetCommitTopic,
    OffsetFetch,
    OffsetFetchGroup,
)
from tests.core.consumer.harness import ConsumerHarness

OK = ErrorCode.NONE
E = ErrorCode


def _commit(h: ConsumerHarness, member_id: str, epoch: int, supports_member_epoch: bool = True) -> ErrorCode:
    ref = h.next_ref()
    h.send(
        OffsetCommit(
            ref, "g", epoch, member_id, None, -1,
            (OffsetCommitTopic("foo", (OffsetCommitPartition(0, 10),)),),
            supports_member_epoch=supports_member_epoch,
        )
    )
    return h.reply(ref).topics[0].partitions[0].error_code


def _fetch(h: ConsumerHarness, member_id: str | None, epoch: int) -> ErrorCode:
    ref = h.next_ref()
    h.send(OffsetFetch(ref, (OffsetFetchGroup("g", member_id, epoch, None),)))
    return h.reply(ref).groups[0].error_code


def test_offset_commit_and_fetch_member_epoch_fencing() -> None:
    h = ConsumerHarness({"foo": 2})
    h.cjoin("a")
    assert _commit(h, "a", 1) == OK
    assert _commit(h, "a", 0) == E.STALE_MEMBER_EPOCH
    assert _commit(h, "a", 2) == E.STALE_MEMBER_EPOCH
    assert _commit(h, "x", 1) == E.UNKNOWN_MEMBER_ID
    assert _commit(h, "a", -1) == E.STALE_MEMBER_EPOCH  # -1 is only for empty groups
    assert _commit(h, "", -1) == E.UNKNOWN_MEMBER_ID  # admin commits only while the group is empty
    assert _commit(h, "a", 1, supports_member_epoch=False) == E.UNSUPPORTED_VERSION
    assert _fetch(h, "a", 1) == OK
    assert _fetch(h, None, -1) == OK  # librdkafka's fetch (no member id, epoch -1)
    assert _fetch(h, "a", 0) == E.STALE_MEMBER_EPOCH
    assert _fetch(h, "x", 1) == E.UNKNOWN_MEMBER_ID
    # Revoking members keep their epoch, so they can still commit what they are giving up.
    h.cjoin("b")
    h.cgh("a", 1)
    assert _commit(h, "a", 1) == OK
    h.cgh("a", -1)
    h.cgh("b", -1)
    assert _commit(h, "", -1) == OK  # empty group: admin commit accepted
