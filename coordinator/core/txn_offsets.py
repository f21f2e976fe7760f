"""Transactional offset commits of groups served here whose transactions live on another cluster
(sidecar mode): Kafka's ``validateTransactionalOffsetCommit``, and which groups keep their offsets
of record on that cluster.

The transaction coordinator and its commit/abort markers are the upstream's, so a transactional
commit's offsets can only become visible, or vanish, where the markers land: on the upstream's
group coordinator. The core therefore never stores a transactional offset. It does the one check
the upstream cannot make (the upstream never sees this group's members): the KIP-447 fencing of
a producer that speaks for a member of an old generation. ``TxnOffsetCommitCheck`` answers NONE
or Kafka's error; the sidecar forwards the accepted ones (``coordinator/sidecar/txn_offsets.py``).

A group's first accepted check with ``mark`` writes an ``OffsetsUpstream`` record: from then on
the group's offsets of record are the upstream's (OffsetFetch is answered from there, and the
offset mirror never overwrites them). The record is durable and replayed, so a restarted or
standby coordinator knows it too; ``OffsetsUpstreamQuery`` lists the marked groups. The marker
outlives a deleted group on purpose: a group that committed transactionally keeps its home.

Validation follows Kafka 4.0-4.3 (``OffsetMetadataManager.validateTransactionalOffsetCommit`` and
each group type's ``validateOffsetCommit`` with ``isTransactional``):
- member id "", generation -1 and no instance id: accepted without group checks (Kafka accepts it
  for any group that is not Dead; the producer's own epoch is still checked upstream);
- no such group: generation < 0 is accepted (Kafka makes a simple group), otherwise
  ILLEGAL_GENERATION;
- otherwise the group type's own offset-commit check: classic, the member (UNKNOWN_MEMBER_ID,
  FENCED_INSTANCE_ID) and the generation (ILLEGAL_GENERATION), with a rebalance in progress no
  error for a transactional commit; KIP-848, the member and its epoch (KIP-1251's assignment
  epoch per partition), a stale epoch answered ILLEGAL_GENERATION as Kafka maps it.
"""

from __future__ import annotations

from collections.abc import Mapping

from coordinator.core.effects import Effects
from coordinator.core.errors import CoordinatorError, ErrorCode
from coordinator.core.groups import DEAD, Group
from coordinator.core.record_codec import Record, RecordStruct, RecordTypeDecl
from coordinator.core.registry import Registration
from coordinator.core.requests import (
    OffsetCommit,
    OffsetCommitPartition,
    OffsetCommitTopic,
    OffsetsUpstreamQuery,
    TxnOffsetCommitCheck,
)
from coordinator.core.responses import OffsetsUpstreamGroups, TxnOffsetCommitChecked

OFFSETS_UPSTREAM = 1003


class OffsetsUpstreamKey(RecordStruct, frozen=True):
    """A group whose offsets of record live on the upstream cluster (sidecar mode: the group commits
    transactionally, so its commits are the upstream's, under the upstream's transaction markers)."""

    group: str


class OffsetsUpstreamValue(RecordStruct, frozen=True):
    since_ms: int  # when the group's first transactional commit was accepted here


RECORD_TYPES = (
    RecordTypeDecl(OFFSETS_UPSTREAM, "OffsetsUpstream", OffsetsUpstreamKey, {0: OffsetsUpstreamValue}),
)


class TxnOffsets:
    def __init__(self, groups: Mapping[str, Group]) -> None:
        self._groups = groups
        self.upstream: set[str] = set()

    @property
    def registration(self) -> Registration:
        return Registration(
            name="txn-offsets",
            record_types=RECORD_TYPES,
            requests={TxnOffsetCommitCheck: self.check, OffsetsUpstreamQuery: self.query},
            error_responses={
                TxnOffsetCommitCheck: lambda req, code: TxnOffsetCommitChecked(int(code)),
                OffsetsUpstreamQuery: lambda req, code: OffsetsUpstreamGroups(frozenset(), int(code)),
            },
            replayers={OffsetsUpstreamKey: self.replay},
        )

    def replay(self, key: OffsetsUpstreamKey, value: OffsetsUpstreamValue | None, live: bool = False) -> None:
        if value is None:
            self.upstream.discard(key.group)
        else:
            self.upstream.add(key.group)

    def query(self, req: OffsetsUpstreamQuery, fx: Effects) -> None:
        fx.reply(req.ref, OffsetsUpstreamGroups(frozenset(self.upstream)))

    def check(self, req: TxnOffsetCommitCheck, fx: Effects) -> None:
        if not req.group_id:
            raise CoordinatorError(ErrorCode.INVALID_GROUP_ID)
        self._validate(req, fx)
        upstream = req.group_id in self.upstream
        if req.mark and not upstream:
            fx.record(Record(OffsetsUpstreamKey(req.group_id), OffsetsUpstreamValue(fx.now_ms)))
            upstream = True
        fx.reply(req.ref, TxnOffsetCommitChecked(ErrorCode.NONE, upstream))

    def _validate(self, req: TxnOffsetCommitCheck, fx: Effects) -> None:
        group = self._groups.get(req.group_id)
        anonymous = req.generation_id < 0 and not req.member_id and req.group_instance_id is None
        if group is None:
            if req.generation_id >= 0:
                raise CoordinatorError(ErrorCode.ILLEGAL_GENERATION)
            return
        if group.state_name == DEAD:
            raise CoordinatorError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if anonymous:
            return
        commit = OffsetCommit(
            ref=req.ref, group_id=req.group_id, generation_id_or_member_epoch=req.generation_id,
            member_id=req.member_id, group_instance_id=req.group_instance_id, retention_time_ms=-1,
            topics=tuple(OffsetCommitTopic(name, tuple(OffsetCommitPartition(p, 0, -1, "") for p in partitions))
                         for name, partitions in req.topics))
        try:
            validator = group.validate_offset_commit(commit, fx)
            if validator is not None:
                for name, partitions in req.topics:
                    for partition in partitions:
                        validator(name, None, partition)
        except CoordinatorError as exc:
            if exc.code == ErrorCode.REBALANCE_IN_PROGRESS:
                return  # raised only after the member and generation passed: no error when transactional
            if exc.code == ErrorCode.STALE_MEMBER_EPOCH:
                raise CoordinatorError(ErrorCode.ILLEGAL_GENERATION, exc.message) from None
            raise
