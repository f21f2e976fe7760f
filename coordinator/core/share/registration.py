"""The share group type's registration with the shard (KIP-932): its records, requests, timers and replay.

``register(ctx)`` is the one line ``shard.GROUP_TYPES`` lists. The type's state is two containers,
each mutated only by its replay: ``membership.ShareGroups`` (records 10-14) and
``state.SharePartitions`` (records 1100-1101). The shard's one group namespace holds a
``group.ShareGroupView`` for every share group, kept in step by the replayers, so the offsets,
ListGroups, DescribeGroups, DeleteGroups and the other types see a group of type ``share``.

The core's pure operations (``membership.heartbeat``, ``state.initialize``, ``release.*``) compute
records and apply them to the containers; the handler hands the same records to ``fx`` and the shard
replays them again. Every share record holds a whole value, so a second replay changes nothing: the
replay path is the same one a load and a standby take.

Requests: ShareGroupHeartbeat (with the start offsets the edge found for subscribed partitions
without state: the core has no log), ShareGroupDescribe, ShareInitialize (the same, after an answer
named partitions still without state) and ShareFetch (ShareFetch and ShareAcknowledge over the
edge's reads, :mod:`.fetch`; the share sessions live here, in memory); the operators' requests:
Describe/Alter/DeleteShareGroupOffsets (:mod:`.offsets`, :mod:`.describe`; the edge hands in the
log ends for the lag) and the private DescribeSharePartitions; and ShareConnectionClosed (the
sessions a closed connection opened end, their records released). A member fenced by its session
timeout releases what it holds and loses its share session; one that leaves keeps both until its
final ShareAcknowledge, its connection closing (or its locks end). Every change to a share
partition reports its transitions as one ``ShareRecordsChanged`` event (the counters; taken from
``SharePartition.applied``, which only the live path fills). Timers:

- ``share-session`` per member: its session timeout; when it fires the member is fenced (as a leave).
- ``share-lock`` per share partition, at its earliest lock deadline: expired locks make their records
  AVAILABLE again (or ARCHIVED at the delivery limit).

On load, every member gets a fresh session and every acquired record is released at once: share
sessions live in memory (Kafka's too), so nobody holds a record a new coordinator handed out, and
waiting for the old locks would only delay their redelivery (Kafka's persister keeps no
acquisitions at all, to the same effect).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any
from uuid import UUID

import msgspec

from coordinator.core.effects import Effects, TimerKey
from coordinator.core.errors import ErrorCode
from coordinator.core.events import ShareRecordsChanged
from coordinator.core.record_codec import Record
from coordinator.core.registry import Gauge, Registration, ShardContext

from . import membership
from .acknowledgement import AckBatch, acknowledge, validate_batches
from .acquisition import AcquireMode
from .config import ShareConfig
from .describe import describe_group, describe_offsets
from .fetch import acquire_from_log
from .group import TYPE_NAME, ShareGroupView
from .membership import HeartbeatConfig, HeartbeatRequest, ShareGroups
from .offsets import OffsetsResult, alter_offsets, delete_offsets
from .partition import SharePartition
from .records import RecordState, ShareGroupRecord, ShareRecord
from .release import expire_locks, release_all, release_member
from .requests import (
    AlterShareGroupOffsets,
    DeleteShareGroupOffsets,
    DescribeShareGroupOffsets,
    DescribeShareGroupOffsetsResponse,
    DescribeSharePartitions,
    DescribeSharePartitionsResponse,
    ShareAckPartition,
    ShareConnectionClosed,
    ShareConnectionClosedResponse,
    ShareFetch,
    ShareFetchResponse,
    ShareGroupDescribe,
    ShareGroupDescribeResponse,
    ShareGroupHeartbeat,
    ShareGroupHeartbeatResponse,
    ShareInitialize,
    ShareInitializeResponse,
    ShareOffsetsResponse,
    SharePartitionAnswer,
)
from .schema import GROUP_RECORD_KEYS, PARTITION_RECORD_KEYS, RECORD_TYPES
from .sessions import ShareSessions
from .state import SharePartitions, initialize

_SESSION_ERRORS = {
    ErrorCode.SHARE_SESSION_NOT_FOUND: "The share session was not found.",
    ErrorCode.INVALID_SHARE_SESSION_EPOCH: "The share session epoch is invalid.",
    ErrorCode.SHARE_SESSION_LIMIT_REACHED: "The limit of share sessions has been reached.",
    ErrorCode.INVALID_REQUEST: "Acknowledgements are not allowed when opening a share session.",
}

SESSION_TIMER = "share-session"
LOCK_TIMER = "share-lock"


class ShareGroupType:
    """The share group type of one shard: its state, its handlers and its registration."""

    def __init__(self, ctx: ShardContext) -> None:
        self.ctx = ctx
        self.groups = ShareGroups()
        self.partitions = SharePartitions()
        self.sessions = ShareSessions()
        """Share sessions: memory only (Kafka's too); the edge reads a session's partitions."""
        self.registration = Registration(
            name=TYPE_NAME,
            record_types=RECORD_TYPES,
            requests={
                ShareGroupHeartbeat: self.heartbeat,
                ShareGroupDescribe: self.describe,
                ShareInitialize: self.initialize,
                ShareFetch: self.fetch,
                DescribeShareGroupOffsets: self.describe_offsets,
                AlterShareGroupOffsets: self.alter_offsets,
                DeleteShareGroupOffsets: self.delete_offsets,
                ShareConnectionClosed: self.connection_closed,
                DescribeSharePartitions: self.describe_partitions,
            },
            error_responses={
                ShareGroupHeartbeat: lambda req, code: ShareGroupHeartbeatResponse(code),
                ShareGroupDescribe: lambda req, code: ShareGroupDescribeResponse(
                    tuple({"group_id": g, "error_code": code, "group_state": "", "members": []}
                          for g in req.group_ids)),
                ShareInitialize: lambda req, code: ShareInitializeResponse(code),
                ShareFetch: lambda req, code: ShareFetchResponse(code),
                DescribeShareGroupOffsets: lambda req, code: DescribeShareGroupOffsetsResponse(
                    tuple({"group_id": g, "error_code": code, "topics": []} for g, _ in req.groups)),
                AlterShareGroupOffsets: lambda req, code: ShareOffsetsResponse(code),
                DeleteShareGroupOffsets: lambda req, code: ShareOffsetsResponse(code),
                ShareConnectionClosed: lambda req, code: ShareConnectionClosedResponse(code),
                DescribeSharePartitions: lambda req, code: DescribeSharePartitionsResponse(
                    tuple({"group_id": g, "error_code": code, "partitions": []} for g in req.group_ids)),
            },
            timers={SESSION_TIMER: self.session_expired, LOCK_TIMER: self.locks_expired},
            replayers={**dict.fromkeys(GROUP_RECORD_KEYS, self.replay_group),
                       **dict.fromkeys(PARTITION_RECORD_KEYS, self.replay_partition)},
            on_loaded=self.loaded,
            gauges=(Gauge("coordinator_share_records", "Records in flight in share partitions, by state.",
                          ("state",), self.records_by_state),),
        )

    # ---- settings ----------------------------------------------------------------------------------

    def share_config(self, group_id: str) -> ShareConfig:
        """The group's share.* configs over the broker-wide settings (read on every use, as Kafka)."""
        g = self.ctx.group_configs.of(group_id)
        return ShareConfig(g.share_record_lock_duration_ms, g.share_delivery_count_limit,
                           self.ctx.config.share_partition_max_record_locks)

    def heartbeat_config(self, group_id: str) -> HeartbeatConfig:
        g = self.ctx.group_configs.of(group_id)
        return HeartbeatConfig(self.ctx.config.share_group_max_size, g.share_heartbeat_interval_ms,
                               g.share_session_timeout_ms)

    # ---- requests ----------------------------------------------------------------------------------

    def heartbeat(self, req: ShareGroupHeartbeat, fx: Effects) -> None:
        other = self.ctx.groups.get(req.group_id)
        taken = other is not None and not isinstance(other, ShareGroupView)
        request = HeartbeatRequest(req.group_id, req.member_id, req.member_epoch, req.rack_id,
                                   req.subscribed_topic_names, req.client_id, req.client_host)
        if req.start_offsets and not taken and membership.validate(request) is None and (
                req.member_epoch == 0 or (req.member_epoch > 0 and self.groups.get(req.group_id) is not None)):
            # Only for a group that exists or that this join creates: no state is left for a group
            # that never was. Harmless if the heartbeat is refused: the partitions would be
            # initialized by the next one anyway.
            self._initialize(req.group_id, req.start_offsets, fx)
        result = membership.heartbeat(self.groups, request, self._topic_image(), self._initialized(req.group_id),
                                      fx.now_ms, self.heartbeat_config(req.group_id), taken)
        if result.error:
            fx.reply(req.ref, ShareGroupHeartbeatResponse(result.error, result.message))
            return
        self._record_group(result.records, fx)
        session = _session_key(req.group_id, req.member_id)
        if result.member_epoch == -1:
            # A leave neither ends the share session nor releases: a closing client sends its
            # leave before its final ShareAcknowledge (librdkafka does), whose acknowledgements
            # must still find the records held and the session open (Kafka keeps the two apart too).
            fx.cancel(session)
        else:
            fx.schedule(session, self.ctx.group_configs.of(req.group_id).share_session_timeout_ms)
        assignment = None if result.assignment is None else tuple(
            (t, tuple(sorted(ps))) for t, ps in sorted(result.assignment.items(), key=lambda kv: str(kv[0])))
        fx.reply(req.ref, ShareGroupHeartbeatResponse(
            result.error, None, result.member_id, result.member_epoch, result.heartbeat_interval_ms, assignment,
            tuple(sorted(result.to_initialize, key=lambda tp: (str(tp[0]), tp[1])))))

    def describe(self, req: ShareGroupDescribe, fx: Effects) -> None:
        names = {t.topic_id: t.name for t in self.ctx.topics}
        out = []
        for group_id in req.group_ids:
            view = self.ctx.groups.get(group_id)
            described = describe_group(group_id, self.groups.get(group_id) if isinstance(view, ShareGroupView)
                                       else None, names)
            if view is not None and not isinstance(view, ShareGroupView):
                described["error_message"] = f"Group {group_id} is not a share group."
            out.append(described)
        fx.reply(req.ref, ShareGroupDescribeResponse(tuple(out)))

    def initialize(self, req: ShareInitialize, fx: Effects) -> None:
        if not isinstance(self.ctx.groups.get(req.group_id), ShareGroupView):
            fx.reply(req.ref, ShareInitializeResponse(ErrorCode.GROUP_ID_NOT_FOUND))
            return
        fx.reply(req.ref, ShareInitializeResponse(ErrorCode.NONE, self._initialize(req.group_id, req.partitions, fx)))

    def _initialize(self, group_id: str, partitions: Sequence[tuple[UUID, int, int]], fx: Effects) -> int:
        """Start the share partitions that have no state yet; how many were started."""
        records: list[ShareRecord] = []
        for topic_id, partition, start in partitions:
            info = self.ctx.topics.by_id(topic_id)
            if info is None or not 0 <= partition < info.num_partitions or start < 0:
                continue  # the topic went (or shrank) meanwhile: the next heartbeat asks again
            records += initialize(self.partitions, group_id, topic_id, partition, start)
        self._record_partitions(records, fx)
        return sum(1 for r in records if r.value is not None)

    def fetch(self, req: ShareFetch, fx: Effects) -> None:
        """ShareFetch / ShareAcknowledge (see ``fetch.py``'s theory of operation)."""
        added = [] if req.acknowledge_only else list(req.added)
        if req.acknowledge_only:
            answer = self.sessions.acknowledge(req.group_id, req.member_id, req.session_epoch, req.node)
        else:
            answer = self.sessions.fetch(req.group_id, req.member_id, req.session_epoch, req.connection_id,
                                         bool(req.acks), added, req.forgotten, req.node)
        if answer.error:
            fx.reply(req.ref, ShareFetchResponse(answer.error, _SESSION_ERRORS.get(answer.error)))
            return
        config = self.share_config(req.group_id)
        touched: dict[tuple[UUID, int], SharePartition] = {}
        answers: dict[tuple[UUID, int], SharePartitionAnswer] = {}
        for acks in req.acks:
            answers[(acks.topic_id, acks.partition)] = self._acknowledge(req, acks, fx, config, touched)
        if answer.final:
            self._end_session(req, fx)
        else:
            budget = req.max_records
            for read in req.reads:
                tp = (read.topic_id, read.partition)
                previous = answers.get(tp, SharePartitionAnswer(read.topic_id, read.partition))
                partition = self.partitions.get(req.group_id, read.topic_id, read.partition)
                if read.error_code or partition is None or req.acknowledge_only:
                    answers[tp] = msgspec.structs.replace(previous, error_code=read.error_code)
                    continue
                got = acquire_from_log(partition, req.member_id, read.log_start_offset, read.batches, read.aborted,
                                       budget, fx.now_ms, config, AcquireMode(req.acquire_mode))
                self._record_partitions(got.records, fx)
                if got.records:
                    touched[tp] = partition
                budget -= sum(r.last_offset - r.first_offset + 1 for r in got.acquired)
                answers[tp] = msgspec.structs.replace(previous, acquired=tuple(
                    (r.first_offset, r.last_offset, r.delivery_count) for r in got.acquired))
        for p in touched.values():
            self.arm_lock(p, fx)
        fx.reply(req.ref, ShareFetchResponse(ErrorCode.NONE, None, config.lock_duration_ms, tuple(answers.values())))

    def _acknowledge(self, req: ShareFetch, acks: ShareAckPartition, fx: Effects, config: ShareConfig,
                     touched: dict[tuple[UUID, int], SharePartition]) -> SharePartitionAnswer:
        batches = [AckBatch(first, last, types) for first, last, types in acks.batches]
        invalid = validate_batches(batches, req.api_version, req.is_renew_ack)
        if invalid is not None:
            return SharePartitionAnswer(acks.topic_id, acks.partition, ack_error_code=ErrorCode.INVALID_REQUEST,
                                        ack_error_message=invalid)
        p = self.partitions.get(req.group_id, acks.topic_id, acks.partition)
        if p is None or not p.initialized:
            return SharePartitionAnswer(acks.topic_id, acks.partition, ack_error_code=ErrorCode.INVALID_RECORD_STATE,
                                        ack_error_message="the share partition has no state")
        result = acknowledge(p, req.member_id, batches, fx.now_ms, config)
        if result.error:
            return SharePartitionAnswer(acks.topic_id, acks.partition, ack_error_code=result.error,
                                        ack_error_message=result.message)
        self._record_partitions(result.records, fx)
        if result.records:
            touched[(acks.topic_id, acks.partition)] = p
        return SharePartitionAnswer(acks.topic_id, acks.partition)

    def describe_offsets(self, req: DescribeShareGroupOffsets, fx: Effects) -> None:
        names = {t.topic_id: t.name for t in self.ctx.topics}
        ends = {(t, p): end for t, p, end in req.log_ends}
        out = []
        for group_id, topics in req.groups:
            view = self.ctx.groups.get(group_id)
            group = self.groups.get(group_id) if isinstance(view, ShareGroupView) else None
            asked = topics if topics is not None else self.initialized_topics(group_id, names)
            out.append(describe_offsets(group_id, group, self.partitions, asked, lambda t, i: ends.get((t, i))))
        fx.reply(req.ref, DescribeShareGroupOffsetsResponse(tuple(out)))

    def describe_partitions(self, req: DescribeSharePartitions, fx: Effects) -> None:
        """What is in flight in each share partition (the admin CLI's describe; no Kafka API has it)."""
        names = {t.topic_id: t.name for t in self.ctx.topics}
        out = []
        for group_id in req.group_ids:
            if not isinstance(self.ctx.groups.get(group_id), ShareGroupView):
                out.append({"group_id": group_id, "error_code": ErrorCode.GROUP_ID_NOT_FOUND, "partitions": []})
                continue
            rows = []
            for p in self.partitions.of_group(group_id):
                if not p.initialized or p.key.topic_id not in names:
                    continue
                counts = p.counts()
                rows.append({"topic_name": names[p.key.topic_id], "partition_index": p.key.partition,
                             "start_offset": p.start_offset,
                             **{state.name.lower(): counts[state] for state in RecordState}})
            rows.sort(key=lambda r: (r["topic_name"], r["partition_index"]))
            out.append({"group_id": group_id, "error_code": ErrorCode.NONE, "partitions": rows})
        fx.reply(req.ref, DescribeSharePartitionsResponse(tuple(out)))

    def initialized_topics(self, group_id: str, names: dict[UUID, str]) -> list[tuple[str, UUID | None, list[int]]]:
        """Every partition the group has state for, by topic (Kafka's "all topics": the initialized
        ones), topics the image no longer has left out."""
        by_topic: dict[UUID, list[int]] = {}
        for p in self.partitions.of_group(group_id):
            if p.initialized and p.key.topic_id in names:
                by_topic.setdefault(p.key.topic_id, []).append(p.key.partition)
        return [(names[t], t, sorted(ps)) for t, ps in sorted(by_topic.items(), key=lambda kv: names[kv[0]])]

    def alter_offsets(self, req: AlterShareGroupOffsets, fx: Effects) -> None:
        result = alter_offsets(self.groups, self.partitions, req.group_id, req.topics, self._topic_image(),
                               self._taken(req.group_id))
        self._offsets_done(req.ref, req.group_id, result, fx)

    def delete_offsets(self, req: DeleteShareGroupOffsets, fx: Effects) -> None:
        result = delete_offsets(self.groups, self.partitions, req.group_id, req.topic_names, self._topic_image(),
                                self._taken(req.group_id))
        self._offsets_done(req.ref, req.group_id, result, fx)

    def _offsets_done(self, ref: int, group_id: str, result: OffsetsResult, fx: Effects) -> None:
        """One entry: the group record (Alter of a new group), then the share partitions' records;
        a partition started afresh or forgotten holds no lock any more, so its timer goes."""
        self._record_group(result.group_records, fx)
        self._record_partitions(result.records, fx)
        for key in {(r.key.topic_id, r.key.partition) for r in result.records}:
            p = self.partitions.get(group_id, *key)
            if p is not None:
                self.arm_lock(p, fx)
            else:
                fx.cancel((LOCK_TIMER, group_id, str(key[0]), str(key[1])))
        fx.reply(ref, ShareOffsetsResponse(result.error, result.message, tuple(
            (name, topic_id, tuple(codes.items())) for name, (topic_id, codes) in result.errors.items())))

    def connection_closed(self, req: ShareConnectionClosed, fx: Effects) -> None:
        """The share sessions the connection opened end, and what their members hold comes back
        now (as a final ShareAcknowledge would release it), one record like any other release."""
        gone = self.sessions.connection_closed(req.connection_id)
        for session in gone:  # what the member holds of that session's partitions (its others go on)
            self._release_member(session.group_id, session.member_id, fx, session.partitions)
        fx.reply(req.ref, ShareConnectionClosedResponse(ErrorCode.NONE, len(gone)))

    # ---- timers ------------------------------------------------------------------------------------

    def session_expired(self, key: TimerKey, fx: Effects) -> None:
        _, group_id, member_id = key
        self._record_group(membership.fence_member(self.groups, group_id, member_id, self._topic_image()), fx)
        self._release_member(group_id, member_id, fx)

    def _end_session(self, req: ShareFetch, fx: Effects) -> None:
        """A final request ends the member's session with that node and releases what it holds of
        the session's partitions (Kafka's ``releaseSession``); its sessions with other nodes go on."""
        session = self.sessions.close(req.group_id, req.member_id, req.node)
        if session is not None:
            self._release_member(req.group_id, req.member_id, fx, session.partitions)

    def _release_member(self, group_id: str, member_id: str, fx: Effects,
                        only: set[tuple[UUID, int]] | None = None) -> None:
        """A member that was fenced holds nothing any more: its sessions go and its acquired records
        come back now, not when their locks run out (``only``: of these partitions, its sessions kept)."""
        if only is None:
            self.sessions.close_member(group_id, member_id)
        config = self.share_config(group_id)
        for p in list(self.partitions.of_group(group_id)):
            if only is not None and (p.key.topic_id, p.key.partition) not in only:
                continue
            records = release_member(p, member_id, config)
            if records:
                self._record_partitions(records, fx)
                self.arm_lock(p, fx)

    def locks_expired(self, key: TimerKey, fx: Effects) -> None:
        _, group_id, topic_id, partition = key
        p = self.partitions.get(group_id, UUID(topic_id), int(partition))
        if p is None:
            return
        self._record_partitions(expire_locks(p, fx.now_ms, self.share_config(group_id)), fx)
        self.arm_lock(p, fx)

    def arm_lock(self, p: SharePartition, fx: Effects) -> None:
        """The partition's lock timer at its earliest lock deadline (cancelled when nothing is held)."""
        key = _lock_key(p)
        deadline = p.next_lock_deadline()
        if deadline is None:
            fx.cancel(key)
        else:
            fx.schedule(key, deadline - fx.now_ms)

    def loaded(self, fx: Effects) -> None:
        for group in self.groups.groups.values():
            for member_id in group.members:
                fx.schedule(_session_key(group.group_id, member_id),
                            self.ctx.group_configs.of(group.group_id).share_session_timeout_ms)
        for group_id in list(self.groups.groups):
            config = self.share_config(group_id)
            for p in list(self.partitions.of_group(group_id)):
                self._record_partitions(release_all(p, config), fx)

    # ---- replay: the only mutators -------------------------------------------------------------------

    def replay_group(self, key: Any, value: Any, live: bool) -> None:
        self.groups.replay(ShareGroupRecord(key, value))
        group_id = key.group_id
        if self.groups.get(group_id) is not None:
            if not isinstance(self.ctx.groups.get(group_id), ShareGroupView):
                self.ctx.groups[group_id] = ShareGroupView(group_id, self.groups, self.partitions, self.ctx.topics)
        elif isinstance(self.ctx.groups.get(group_id), ShareGroupView):
            del self.ctx.groups[group_id]

    def replay_partition(self, key: Any, value: Any, live: bool) -> None:
        self.partitions.replay(ShareRecord(key, value))

    # ---- views ----------------------------------------------------------------------------------------

    def records_by_state(self) -> dict[tuple[str, ...], float]:
        counts: Counter[str] = Counter()
        for group_id in self.groups.groups:
            for p in self.partitions.of_group(group_id):
                for state, n in p.counts().items():
                    counts[state.name.lower()] += n
        return {(state.name.lower(),): float(counts[state.name.lower()]) for state in RecordState}

    # ---- helpers -------------------------------------------------------------------------------------

    def _taken(self, group_id: str) -> bool:
        """The id names a group of another type."""
        other = self.ctx.groups.get(group_id)
        return other is not None and not isinstance(other, ShareGroupView)

    def _topic_image(self) -> dict[str, tuple[UUID, int]]:
        return {t.name: (t.topic_id, t.num_partitions) for t in self.ctx.topics}

    def _initialized(self, group_id: str) -> Any:
        def initialized(topic_id: UUID) -> list[int]:
            info = self.ctx.topics.by_id(topic_id)
            count = info.num_partitions if info is not None else 0
            return [i for i in range(count)
                    if (p := self.partitions.get(group_id, topic_id, i)) is not None and p.initialized]
        return initialized

    @staticmethod
    def _record_group(records: Sequence[ShareGroupRecord], fx: Effects) -> None:
        for r in records:
            fx.record(Record(r.key, r.value))

    def _record_partitions(self, records: Sequence[ShareRecord], fx: Effects) -> None:
        """Hand ``records`` to the log, and report the transitions their application made (taken
        from the partitions they belong to: counted once, by the live path, never by replay)."""
        touched: set[tuple[str, UUID, int]] = set()
        for r in records:
            fx.record(Record(r.key, r.value))
            touched.add((r.key.group_id, r.key.topic_id, r.key.partition))
        for group_id, topic_id, partition in touched:
            p = self.partitions.get(group_id, topic_id, partition)
            if p is None or not p.applied:
                continue
            t = p.applied.take()
            fx.event(ShareRecordsChanged(group_id, t.acquired, t.acknowledged, t.released, t.archived, t.lock_expired))


def _session_key(group_id: str, member_id: str) -> TimerKey:
    return (SESSION_TIMER, group_id, member_id)


def _lock_key(p: SharePartition) -> TimerKey:
    return (LOCK_TIMER, p.key.group_id, str(p.key.topic_id), str(p.key.partition))


def register(ctx: ShardContext) -> ShareGroupType:
    return ShareGroupType(ctx)


__all__ = ["LOCK_TIMER", "SESSION_TIMER", "ShareGroupType", "register"]
