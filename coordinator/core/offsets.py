"""Committed offsets: OffsetCommit, OffsetFetch, OffsetDelete and retention (Kafka's
``OffsetMetadataManager`` plus ``GroupCoordinatorShard.cleanupGroupMetadata``).

Durable state: ``offsets[group][topic][partition] -> OffsetCommitValue``, changed ONLY by
:meth:`OffsetManager.replay` of OffsetCommit records (values and tombstones). Handlers emit records and
the shard applies them through ``replay`` at the end of the operation, so live state and a replay of
the log agree by construction.

The state holds the decoded record value itself (an immutable msgspec struct; ``expire_timestamp``
-1 = none) rather than a converted copy: start-up replays every offset commit in the log, and building
a second object per record (a GC-tracked dataclass, where msgspec structs of scalars are untracked)
was a third of the load time. :meth:`OffsetManager.get` still answers with an ``OffsetAndMetadata``.

Replaying an offset for a group that does not exist creates a "simple" classic group (Empty, no
protocol type), as Kafka does: consumers that commit without group management own such groups.

KIP-848 consumer groups validate by member epoch (``ConsumerGroup.validateOffsetCommit`` /
``validateOffsetFetch``): a member's commit or fetch must carry its CURRENT epoch exactly
(STALE_MEMBER_EPOCH, no previous-epoch grace), unknown members get UNKNOWN_MEMBER_ID, and commits
with epoch < 0 are accepted only while the group has no members (admin tools). Their offsets expire
``offsets.retention.minutes`` after the commit, except for topics the group subscribes to.

Transactional offsets (TxnOffsetCommit) are not implemented, so there are never pending transactional
offsets: ``require_stable`` fetches never answer UNSTABLE_OFFSET_COMMIT. Stability still holds in the
sense Kafka cares about: the runtime releases a fetch's reply only after every earlier write of the
shard is durable, so a fetch always sees every acknowledged commit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from coordinator.core.classic.group import ClassicGroup
from coordinator.core.classic.state import (
    DEAD,
    EMPTY,
    PREPARING_REBALANCE,
    STABLE,
    Api,
    Check,
    state_error,
)
from coordinator.core.config import GroupConfig
from coordinator.core.consumer.group import EMPTY as CONSUMER_EMPTY
from coordinator.core.consumer.group import ConsumerGroup
from coordinator.core.effects import Effects, classic_heartbeat_key
from coordinator.core.errors import CoordinatorError, ErrorCode
from coordinator.core.events import GroupDeleted, OffsetsCommitted, OffsetsDeleted
from coordinator.core.groups import Group
from coordinator.core.records import (
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
)
from coordinator.core.requests import OffsetCommit, OffsetDelete, OffsetFetch, OffsetFetchGroup
from coordinator.core.responses import (
    OffsetCommitResponse,
    OffsetDeleteResponse,
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponseTopic,
    PartitionError,
    TopicPartitionErrors,
)

if TYPE_CHECKING:
    from coordinator.core.consumer.manager import ConsumerGroupManager

NONE = ErrorCode.NONE


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    committed_offset: int
    leader_epoch: int  # -1 = none
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int | None  # only from OffsetCommit v2-4 with an explicit retention

    @classmethod
    def from_record(cls, value: OffsetCommitValue) -> OffsetAndMetadata:
        return cls(
            committed_offset=value.offset,
            leader_epoch=value.leader_epoch,
            metadata=value.metadata,
            commit_timestamp_ms=value.commit_timestamp,
            expire_timestamp_ms=None if value.expire_timestamp == -1 else value.expire_timestamp,
        )

    def to_record(self) -> OffsetCommitValue:
        return OffsetCommitValue(
            offset=self.committed_offset,
            leader_epoch=self.leader_epoch,
            metadata=self.metadata,
            commit_timestamp=self.commit_timestamp_ms,
            expire_timestamp=-1 if self.expire_timestamp_ms is None else self.expire_timestamp_ms,
        )


GroupOffsets = dict[str, dict[int, OffsetCommitValue]]


def _java_string_length(text: str) -> int:
    """Kafka compares ``metadata.length()``: UTF-16 code units, not bytes."""
    return len(text.encode("utf-16-le")) // 2


def offset_commit_tombstone(group_id: str, topic: str, partition: int) -> Record:
    return Record(OffsetCommitKey(group_id, topic, partition), None)


class OffsetManager:
    def __init__(
        self, config: GroupConfig, groups: dict[str, Group], consumer: ConsumerGroupManager | None = None
    ) -> None:
        self.config = config
        self.groups = groups
        self.consumer = consumer  # KIP-848 groups: regex subscriptions and group deletion
        self.offsets: dict[str, GroupOffsets] = {}

    # ---- replay (the only writer of self.offsets) --------------------------------------------

    def replay(self, key: OffsetCommitKey, value: OffsetCommitValue | None) -> None:
        # Start-up runs this once per offset commit in the log: plain lookups, no throw-away dicts.
        group_id = key.group
        topics = self.offsets.get(group_id)
        if value is None:
            if topics is None:
                return
            partitions = topics.get(key.topic)
            if partitions is not None:
                partitions.pop(key.partition, None)
                if not partitions:
                    del topics[key.topic]
            if not topics:
                del self.offsets[group_id]
            return
        if group_id not in self.groups:
            self.groups[group_id] = ClassicGroup(group_id)  # a "simple" group
        if topics is None:
            topics = self.offsets[group_id] = {}
        partitions = topics.get(key.topic)
        if partitions is None:
            partitions = topics[key.topic] = {}
        partitions[key.partition] = value

    def get(self, group_id: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        value = self._get(group_id, topic, partition)
        return None if value is None else OffsetAndMetadata.from_record(value)

    def _get(self, group_id: str, topic: str, partition: int) -> OffsetCommitValue | None:
        return self.offsets.get(group_id, {}).get(topic, {}).get(partition)

    # ---- OffsetCommit --------------------------------------------------------------------------

    def commit(self, req: OffsetCommit, fx: Effects) -> None:
        self._validate_commit(req, fx)
        expire = -1 if req.retention_time_ms == -1 else fx.now_ms + req.retention_time_ms
        topics = []
        count = 0
        for topic in req.topics:
            partitions = []
            for p in topic.partitions:
                metadata = p.committed_metadata or ""
                if _java_string_length(metadata) > self.config.offset_metadata_max_bytes:
                    partitions.append(PartitionError(p.partition_index, ErrorCode.OFFSET_METADATA_TOO_LARGE))
                    continue
                offset = OffsetCommitValue(
                    offset=p.committed_offset,
                    leader_epoch=p.committed_leader_epoch,
                    metadata=metadata,
                    commit_timestamp=fx.now_ms if p.commit_timestamp_ms == -1 else p.commit_timestamp_ms,
                    expire_timestamp=expire,
                )
                fx.record(Record(OffsetCommitKey(req.group_id, topic.name, p.partition_index), offset))
                partitions.append(PartitionError(p.partition_index, NONE))
                count += 1
            topics.append(TopicPartitionErrors(topic.name, tuple(partitions)))
        if count:
            fx.event(OffsetsCommitted(req.group_id, count))
        fx.reply(req.ref, OffsetCommitResponse(tuple(topics)))

    def _validate_commit(self, req: OffsetCommit, fx: Effects) -> None:
        group = self.groups.get(req.group_id)
        generation = req.generation_id_or_member_epoch
        if group is None:
            if generation < 0:
                return  # a simple group; replaying the first offset record creates it
            # Adapters answer ILLEGAL_GENERATION below v9.
            raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND)
        if isinstance(group, ConsumerGroup):
            self._validate_consumer_group_commit(group, req)
            return
        error = state_error(Api.OFFSET_COMMIT, group.state, Check.BEFORE_MEMBER)
        if error is not None:
            raise CoordinatorError(error)
        if generation < 0 and group.state is EMPTY:
            return  # admin client or manual assignment: allowed while nobody is a member
        if generation >= 0 or req.member_id or req.group_instance_id is not None:
            member = group.validate_member(req.member_id, req.group_instance_id)
            if generation != group.generation_id:
                raise CoordinatorError(ErrorCode.ILLEGAL_GENERATION)
        else:
            raise CoordinatorError(ErrorCode.UNKNOWN_MEMBER_ID)
        error = state_error(Api.OFFSET_COMMIT, group.state, Check.AFTER_MEMBER)
        if error is not None:
            raise CoordinatorError(error)
        if group.state in (STABLE, PREPARING_REBALANCE):
            # A classic member's commits keep its session alive.
            fx.schedule(classic_heartbeat_key(group.group_id, member.member_id), member.session_timeout_ms)

    @staticmethod
    def _validate_consumer_group_commit(group: ConsumerGroup, req: OffsetCommit) -> None:
        epoch = req.generation_id_or_member_epoch
        if epoch < 0 and not group.members:
            return  # admin client or manual assignment while nobody is a member
        member = group.members.get(req.member_id)
        if member is None:
            raise CoordinatorError(
                ErrorCode.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group {group.group_id}."
            )
        if not req.supports_member_epoch:
            raise CoordinatorError(
                ErrorCode.UNSUPPORTED_VERSION,
                "OffsetCommit version 9 or above must be used by members using the modern group protocol",
            )
        _check_member_epoch(epoch, member.member_epoch)

    @staticmethod
    def commit_error_response(req: OffsetCommit, code: ErrorCode) -> OffsetCommitResponse:
        """A group-level error, copied into every partition (the response has no top-level error)."""
        return OffsetCommitResponse(
            tuple(
                TopicPartitionErrors(t.name, tuple(PartitionError(p.partition_index, code) for p in t.partitions))
                for t in req.topics
            )
        )

    # ---- OffsetFetch ---------------------------------------------------------------------------

    def fetch(self, req: OffsetFetch, fx: Effects) -> None:
        fx.reply(req.ref, OffsetFetchResponse(tuple(self._fetch_group(g) for g in req.groups)))

    def _fetch_group(self, request: OffsetFetchGroup) -> OffsetFetchResponseGroup:
        group = self.groups.get(request.group_id)
        # Classic groups do not validate the fetcher. An absent or Dead group reads as "no offsets".
        offsets: GroupOffsets = {}
        if isinstance(group, ConsumerGroup):
            if request.member_id is not None or request.member_epoch >= 0:
                member = group.members.get(request.member_id or "")
                if member is None:
                    return OffsetFetchResponseGroup(request.group_id, ErrorCode.UNKNOWN_MEMBER_ID)
                if request.member_epoch != member.member_epoch:
                    return OffsetFetchResponseGroup(request.group_id, ErrorCode.STALE_MEMBER_EPOCH)
            offsets = self.offsets.get(request.group_id, {})
        elif group is not None and group.state is not DEAD:
            offsets = self.offsets.get(request.group_id, {})
        if request.topics is None:
            topics = tuple(
                OffsetFetchResponseTopic(
                    name,
                    tuple(_fetched(partition, o) for partition, o in partitions.items()),
                )
                for name, partitions in offsets.items()
            )
        else:
            topics = tuple(
                OffsetFetchResponseTopic(
                    t.name,
                    tuple(_fetched(p, offsets.get(t.name, {}).get(p)) for p in t.partition_indexes),
                )
                for t in request.topics
            )
        return OffsetFetchResponseGroup(request.group_id, NONE, topics)

    # ---- OffsetDelete --------------------------------------------------------------------------

    def delete(self, req: OffsetDelete, fx: Effects) -> None:
        if not req.group_id:
            raise CoordinatorError(ErrorCode.INVALID_GROUP_ID)
        group = self.groups.get(req.group_id)
        if group is None:
            raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND)
        if isinstance(group, ClassicGroup):  # consumer groups allow OffsetDelete in every state
            error = state_error(Api.OFFSET_DELETE, group.state, Check.BEFORE_MEMBER)
            if error is not None and not (error is ErrorCode.NON_EMPTY_GROUP and group.uses_consumer_protocol):
                raise CoordinatorError(error)
        topics = []
        count = 0
        for topic in req.topics:
            if self._is_subscribed(group, topic.name):
                code = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                topics.append(
                    TopicPartitionErrors(topic.name, tuple(PartitionError(p, code) for p in topic.partition_indexes))
                )
                continue
            for p in topic.partition_indexes:
                if self._get(req.group_id, topic.name, p) is not None:
                    fx.record(offset_commit_tombstone(req.group_id, topic.name, p))
                    count += 1
            topics.append(TopicPartitionErrors(topic.name, tuple(PartitionError(p, NONE) for p in topic.partition_indexes)))
        if count:
            fx.event(OffsetsDeleted(req.group_id, count, "offset-delete"))
        fx.reply(req.ref, OffsetDeleteResponse(NONE, tuple(topics)))

    def delete_all_offsets(self, group_id: str, fx: Effects) -> int:
        count = 0
        for topic, partitions in self.offsets.get(group_id, {}).items():
            for partition in partitions:
                fx.record(offset_commit_tombstone(group_id, topic, partition))
                count += 1
        return count

    # ---- retention -----------------------------------------------------------------------------

    def _is_subscribed(self, group: Group, topic: str) -> bool:
        if isinstance(group, ClassicGroup):
            return group.is_subscribed_to_topic(topic)
        regex_topics = self.consumer.regex_topics(group) if self.consumer is not None else {}
        return group.is_subscribed_to_topic(topic, regex_topics)

    def cleanup_group_metadata(self, fx: Effects) -> None:
        """The periodic scan: expire offsets, then delete Empty groups that have none left."""
        for group_id, group in list(self.groups.items()):
            if isinstance(group, ConsumerGroup):
                expired_all = self._cleanup_expired_offsets(group, fx)
                if expired_all and group.state_name == CONSUMER_EMPTY and self.consumer is not None:
                    self.consumer.delete_group(group, "expired", fx)
                continue
            if self._cleanup_expired_offsets(group, fx) and group.state is EMPTY:
                fx.record(Record(GroupMetadataKey(group_id), None))
                fx.event(GroupDeleted(group_id, group.group_type, "expired"))

    def _cleanup_expired_offsets(self, group: Group, fx: Effects) -> bool:
        """Tombstone expired offsets of ``group``; True when it has no offsets left."""
        topics = self.offsets.get(group.group_id)
        if not topics:
            return True
        if isinstance(group, ConsumerGroup):
            def base(o: OffsetCommitValue) -> int:  # KIP-848 groups: from the commit, in any state
                return o.commit_timestamp
        elif group.protocol_type is not None:
            if group.state is EMPTY:
                # Retention counts from when the group became Empty (commit time for old records).
                def base(o: OffsetCommitValue) -> int:
                    return o.commit_timestamp if group.state_timestamp_ms is None else group.state_timestamp_ms
            elif group.uses_consumer_protocol and group.subscribed_topics is not None and group.state is STABLE:
                def base(o: OffsetCommitValue) -> int:
                    return o.commit_timestamp
            else:
                return False  # rebalancing, or a non-consumer protocol with members: nothing expires
        else:
            def base(o: OffsetCommitValue) -> int:  # simple group
                return o.commit_timestamp

        now = fx.now_ms
        retention = self.config.offsets_retention_ms
        all_expired = True
        expired = 0
        for topic, partitions in topics.items():
            if self._is_subscribed(group, topic):
                all_expired = False
                continue
            for partition, o in partitions.items():
                if o.expire_timestamp != -1:
                    is_expired = now >= o.expire_timestamp  # explicit retention (OffsetCommit v2-4)
                else:
                    is_expired = now - base(o) >= retention
                if is_expired:
                    fx.record(offset_commit_tombstone(group.group_id, topic, partition))
                    expired += 1
                else:
                    all_expired = False
        if expired:
            fx.event(OffsetsDeleted(group.group_id, expired, "expired"))
        return all_expired


def _check_member_epoch(received: int, expected: int) -> None:
    if received != expected:
        raise CoordinatorError(
            ErrorCode.STALE_MEMBER_EPOCH,
            f"The received member epoch {received} does not match the expected member epoch {expected}.",
        )


def _fetched(partition: int, offset: OffsetCommitValue | None) -> OffsetFetchResponsePartition:
    if offset is None:
        return OffsetFetchResponsePartition(partition)
    return OffsetFetchResponsePartition(partition, offset.offset, offset.leader_epoch, offset.metadata)
