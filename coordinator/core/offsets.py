"""Committed offsets: OffsetCommit, OffsetFetch, OffsetDelete and retention (Kafka's
``OffsetMetadataManager`` plus ``GroupCoordinatorShard.cleanupGroupMetadata``).

Durable state: ``offsets[group][topic][partition] -> OffsetCommitValue``, changed ONLY by
:meth:`OffsetManager.replay` of OffsetCommit records (values and tombstones). Handlers emit records and
the shard applies them through ``replay`` at the end of the operation, so live state and a replay of
the log agree by construction.

The state holds the record value itself (an immutable msgspec struct; ``expire_timestamp`` -1 =
none) rather than a converted copy, and loading stores the value's bytes as the log has them, decoded
on first read (``_get``, ``group_offsets``; the one way to read the state): start-up replays every
offset commit in the log, and building objects for each was most of the load time; most loaded
offsets are read once or never before being committed again. :meth:`OffsetManager.get` still answers
with an ``OffsetAndMetadata``.

Replaying an offset for a group that does not exist creates a "simple" classic group (Empty, no
protocol type), as Kafka does: consumers that commit without group management own such groups.

Groups are reached only through the :class:`~coordinator.core.groups.Group` contract: each type
validates commits, fetches and deletes (classic: generation and state; KIP-848: the member's
current epoch, or for a commit an older one at or after each partition's assignment epoch, KIP-1251), says which topics it is subscribed to (their offsets neither expire nor can be
deleted) and what an offset's retention counts from (``offset_expiration_base``). An Empty group
whose offsets all expired is deleted (``groups.delete_group``).

OffsetCommit and OffsetFetch v10 name topics by id (Kafka 4.2); ids are resolved here against the
shard's topic image, offsets stay keyed by name, and a commit by id remembers the id it was for.

Transactional offsets are never stored here: in sidecar mode a TxnOffsetCommit is checked by
``core/txn_offsets.py`` and its offsets live on the upstream cluster, where the transaction markers
decide them (that group's OffsetFetch is answered from there); the embedded mode has no
transactions. So there are never pending transactional offsets here, and ``require_stable`` fetches
never answer UNSTABLE_OFFSET_COMMIT. Stability still holds in the sense Kafka cares about: the
runtime releases a fetch's reply only after every earlier write of the shard is durable, so a fetch
always sees every acknowledged commit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import cast

import msgspec

from coordinator.core.config import GroupConfig
from coordinator.core.effects import OFFSETS_EXPIRATION_KEY, Effects, TimerKey
from coordinator.core.errors import CoordinatorError, ErrorCode
from coordinator.core.events import OffsetsCommitted, OffsetsDeleted
from coordinator.core.groups import DEAD, CommitValidator, Group, delete_group
from coordinator.core.offset_records import (
    OFFSET_COMMIT,
    OFFSET_COMMIT_VALUE_VERSION,
    RECORD_TYPES,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_offset_commit_key,
    decode_offset_commit_value,
)
from coordinator.core.record_codec import IDENTITY_HEAD_SIZE, Record
from coordinator.core.registry import Registration
from coordinator.core.requests import (
    OffsetCommit,
    OffsetDelete,
    OffsetFetch,
    OffsetFetchGroup,
    OffsetFetchTopic,
)
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
from coordinator.core.topics import TopicsImage

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
# As stored: a value may still be the encoded bytes loading read (``OffsetManager.replay_loaded``).
_StoredPartitions = dict[int, OffsetCommitValue | bytes]


class LoadPlaces:
    """Where loaded offset commit values go, by key bytes (``OffsetManager.replay_loaded``), carried
    across the calls of one load; nothing but the load may change the shard until it ends. Reads
    may come between calls: a group's values decoded by a read empty the places (``decodes``)."""

    __slots__ = ("decodes", "entries")

    def __init__(self) -> None:
        self.entries: dict[bytes, tuple[_StoredPartitions, int, int]] = {}
        self.decodes = 0  # the manager's count of groups decoded when the entries were made


def _java_string_length(text: str) -> int:
    """Kafka compares ``metadata.length()``: UTF-16 code units, not bytes."""
    return len(text.encode("utf-16-le")) // 2


def offset_commit_record(group_id: str, topic: str, partition: int, value: OffsetCommitValue) -> Record:
    return Record(OffsetCommitKey(group_id, topic, partition), value)


def offset_commit_tombstone(group_id: str, topic: str, partition: int) -> Record:
    return Record(OffsetCommitKey(group_id, topic, partition), None)


class OffsetManager:
    """Offsets of every group; groups are reached only through the ``Group`` contract.

    ``simple_group(group_id)`` makes the group an offset commit creates when none exists (Kafka:
    an Empty classic group without protocol type); the shard passes the classic type's factory."""

    def __init__(
        self,
        config: GroupConfig,
        groups: dict[str, Group],
        simple_group: Callable[[str], Group],
        topics: TopicsImage | None = None,
    ) -> None:
        self.config = config
        self.groups = groups
        self.simple_group = simple_group
        # The shard's topic image (read-only here): OffsetCommit/OffsetFetch v10 name topics by id.
        self.topics = topics if topics is not None else TopicsImage()
        # Values as ``replay`` stores them, or still encoded where loading stored them (see
        # ``replay_loaded``): read them through ``_get`` and ``group_offsets``, which decode.
        self.offsets: dict[str, dict[str, _StoredPartitions]] = {}
        self._encoded_groups: set[str] = set()  # groups that may hold encoded values
        self._decodes = 0  # groups taken out of _encoded_groups (their values decoded)

    @property
    def registration(self) -> Registration:
        return Registration(
            name="offsets",
            record_types=RECORD_TYPES,
            requests={OffsetCommit: self.commit, OffsetFetch: self.fetch, OffsetDelete: self.delete},
            error_responses={
                OffsetCommit: self.commit_error_response,
                OffsetFetch: lambda req, code: OffsetFetchResponse(
                    tuple(OffsetFetchResponseGroup(g.group_id, code) for g in req.groups)
                ),
                OffsetDelete: lambda req, code: OffsetDeleteResponse(code),
            },
            timers={OFFSETS_EXPIRATION_KEY[0]: self._on_expiration_timer},
            replayers={OffsetCommitKey: self.replay},
            on_loaded=self._schedule_expiration,
        )

    def _schedule_expiration(self, fx: Effects) -> None:
        fx.schedule(OFFSETS_EXPIRATION_KEY, self.config.offsets_retention_check_interval_ms)

    def _on_expiration_timer(self, key: TimerKey, fx: Effects) -> None:
        self.cleanup_group_metadata(fx)
        self._schedule_expiration(fx)

    # ---- replay (with replay_loaded, the only writer of self.offsets) ------------------------

    def replay(self, key: OffsetCommitKey, value: OffsetCommitValue | None, live: bool = False) -> None:
        if value is None:
            topics = self.offsets.get(key.group)
            if topics is None:
                return
            partitions = topics.get(key.topic)
            if partitions is not None:
                partitions.pop(key.partition, None)
                if not partitions:
                    del topics[key.topic]
            if not topics:
                del self.offsets[key.group]
                self._encoded_groups.discard(key.group)
            return
        self._partitions(key.group, key.topic)[key.partition] = value

    def _partitions(self, group_id: str, topic: str) -> _StoredPartitions:
        """Where a value of ``group_id``'s ``topic`` goes: created if needed, and the group too (a
        simple group) if it does not exist."""
        if group_id not in self.groups:
            self.groups[group_id] = self.simple_group(group_id)
        topics = self.offsets.get(group_id)
        if topics is None:
            topics = self.offsets[group_id] = {}
        partitions = topics.get(topic)
        if partitions is None:
            partitions = topics[topic] = {}
        return partitions

    def replay_loaded(
        self,
        records: Iterable[tuple[bytes, bytes | None]],
        replay_other: Callable[[bytes, bytes | None], int],
        places: LoadPlaces | None = None,
    ) -> int:
        """Replay records as the record log loads them (identity and value bytes:
        ``records.replay_encoded_record``), in order; returns how many were skipped as unknown.

        Loading runs this once per record of the log, and nearly all of them are offset commit
        values, most of them overwritten by a later commit of the partition. Those of the value
        version written today are stored as they are, encoded, where ``replay`` would store them
        (decoded on first read: ``_get``, ``group_offsets``), so one overwritten costs a store;
        every other record goes to ``replay_other`` (the registered replayers, this class's
        ``replay`` for tombstones).

        Where a value goes is found without decoding its key when a key that differs from it
        only in its last byte was stored before: ``places`` maps the identity minus its last byte
        (type, key length, group, topic, and the partition's encoding but its low byte) to the
        partitions dict, the partition minus its low byte (``base``) and the bound of the last
        byte (``limit``). msgpack is big-endian, so the last byte is the partition itself for a
        positive fixint (base 0, below 128) and the low byte of a longer integer (any byte), and
        the partition is base + last byte. An entry is made after ``_partitions`` (which creates
        the simple group), and every entry is dropped when a tombstone is replayed (an offset
        commit tombstone may drop a partitions dict, a group's tombstone the group) or a group
        is gone after another record, so a hit stores into a group that exists, in the
        partitions dict ``replay`` would. (Values never drop offsets; a group's value records
        replace a group, never drop one, and the count of groups would show it if they came to.)
        ``places`` may be carried from one call to the next (``LoadPlaces``); by default it lasts
        one call. (A group read in between is no longer marked as holding encoded values, so its
        entries must go: they all do.)
        """
        decode_key = decode_offset_commit_key
        offset_commit = OFFSET_COMMIT
        version = OFFSET_COMMIT_VALUE_VERSION.to_bytes(2, "big")
        encoded_groups = self._encoded_groups
        groups = self.groups
        unknown = 0
        if places is None:
            places = LoadPlaces()
        if places.decodes != self._decodes:
            places.entries.clear()
            places.decodes = self._decodes
        entries = places.entries
        place_of = entries.get
        for identity, value in records:
            if value is not None and value[:2] == version:
                last = identity[-1]
                head = identity[:-1]
                place = place_of(head)
                if place is not None:  # the head says the type: an offset commit
                    partitions, base, limit = place
                    if last < limit:
                        partitions[base + last] = value
                        continue
                if identity[1] == offset_commit and not identity[0]:
                    try:
                        group_id, topic, partition = decode_key(identity[IDENTITY_HEAD_SIZE:])
                    except msgspec.ValidationError:  # not three fields: the general decoder decides
                        pass
                    else:
                        partitions = self._partitions(group_id, topic)
                        partitions[partition] = value
                        encoded_groups.add(group_id)
                        if 0 <= partition < 128:
                            if partition == last:  # a fixint (or the low byte of a longer encoding)
                                entries[head] = (partitions, 0, 128)
                        elif partition >= 128 and partition & 255 == last:
                            entries[head] = (partitions, partition - last, 256)
                        continue
            # Anything else: another type, a tombstone, a value too short (the general decoder
            # says why) or of a version other than today's.
            groups_before = len(groups)
            unknown += replay_other(identity, value)
            if value is None or len(groups) < groups_before:
                entries.clear()  # offsets or a group may be gone (see the docstring)
        return unknown

    def get(self, group_id: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        value = self._get(group_id, topic, partition)
        return None if value is None else OffsetAndMetadata.from_record(value)

    def _get(self, group_id: str, topic: str, partition: int) -> OffsetCommitValue | None:
        partitions = self.offsets.get(group_id, {}).get(topic, {})
        value = partitions.get(partition)
        if isinstance(value, bytes):  # as loading stored it
            value = partitions[partition] = decode_offset_commit_value(value[2:])
        return value

    def group_offsets(self, group_id: str) -> GroupOffsets | None:
        """``group_id``'s offsets by topic and partition, decoded (what loading left encoded is
        decoded now, once); None when it has none."""
        topics = self.offsets.get(group_id)
        if topics is not None and group_id in self._encoded_groups:
            self._encoded_groups.discard(group_id)
            self._decodes += 1
            decode = decode_offset_commit_value
            for partitions in topics.values():
                for partition, value in partitions.items():  # values replaced, never keys: safe
                    if isinstance(value, bytes):
                        partitions[partition] = decode(value[2:])
        return cast("GroupOffsets | None", topics)

    # ---- OffsetCommit --------------------------------------------------------------------------

    def commit(self, req: OffsetCommit, fx: Effects) -> None:
        validator = self._validate_commit(req, fx)
        now = fx.now_ms
        expire = -1 if req.retention_time_ms == -1 else now + req.retention_time_ms
        max_metadata = self.config.offset_metadata_max_bytes
        # A string of n characters has at most 2n UTF-16 code units: shorter ones need no count.
        short = max_metadata // 2
        group_id = req.group_id
        # One pass: every partition's verdict, and the records of those accepted kept aside. A
        # validator may refuse the whole commit (Kafka throws from the middle of its loop and drops
        # what it built), so nothing reaches `fx` before the loop ends.
        records: list[Record] = []
        topics = []
        for topic in req.topics:
            name = topic.name
            topic_id = topic.topic_id
            if topic_id is not None:
                # v10 names topics by id; an id the metadata does not know is UNKNOWN_TOPIC_ID
                # (KafkaApis answers it before the coordinator sees the request).
                info = self.topics.by_id(topic_id)
                if info is None:
                    topics.append(TopicPartitionErrors("", tuple(
                        PartitionError(p.partition_index, ErrorCode.UNKNOWN_TOPIC_ID) for p in topic.partitions),
                        topic_id))
                    continue
                name = info.name
            verdicts = []
            for p in topic.partitions:
                metadata = p.committed_metadata or ""
                if len(metadata) > short and _java_string_length(metadata) > max_metadata:
                    verdicts.append(PartitionError(p.partition_index, ErrorCode.OFFSET_METADATA_TOO_LARGE))
                    continue
                if validator is not None:
                    validator(name, topic_id, p.partition_index)
                verdicts.append(PartitionError(p.partition_index, NONE))
                timestamp = p.commit_timestamp_ms
                records.append(Record(OffsetCommitKey(group_id, name, p.partition_index), OffsetCommitValue(
                    p.committed_offset, p.committed_leader_epoch, metadata,
                    now if timestamp == -1 else timestamp, expire, topic_id)))
            topics.append(TopicPartitionErrors(name, tuple(verdicts), topic_id))
        for record in records:
            fx.record(record)
        if records:
            fx.event(OffsetsCommitted(group_id, len(records)))
        fx.reply(req.ref, OffsetCommitResponse(tuple(topics)))

    def _validate_commit(self, req: OffsetCommit, fx: Effects) -> CommitValidator | None:
        group = self.groups.get(req.group_id)
        if group is None:
            if req.generation_id_or_member_epoch < 0:
                return None  # a simple group; replaying the first offset record creates it
            # Adapters answer ILLEGAL_GENERATION below v9.
            raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND)
        return group.validate_offset_commit(req, fx)

    @staticmethod
    def commit_error_response(req: OffsetCommit, code: ErrorCode) -> OffsetCommitResponse:
        """A group-level error, copied into every partition (the response has no top-level error)."""
        return OffsetCommitResponse(
            tuple(
                TopicPartitionErrors(
                    t.name, tuple(PartitionError(p.partition_index, code) for p in t.partitions), t.topic_id
                )
                for t in req.topics
            )
        )

    # ---- OffsetFetch ---------------------------------------------------------------------------

    def fetch(self, req: OffsetFetch, fx: Effects) -> None:
        fx.reply(req.ref, OffsetFetchResponse(tuple(self._fetch_group(g) for g in req.groups)))

    def _fetch_group(self, request: OffsetFetchGroup) -> OffsetFetchResponseGroup:
        group = self.groups.get(request.group_id)
        # An absent or Dead group reads as "no offsets".
        offsets: GroupOffsets = {}
        if group is not None:
            try:
                group.validate_offset_fetch(request.member_id, request.member_epoch)
            except CoordinatorError as exc:
                return OffsetFetchResponseGroup(request.group_id, exc.code)
            if group.state_name != DEAD:
                offsets = self.group_offsets(request.group_id) or {}
        if request.topics is None:
            topics = tuple(
                OffsetFetchResponseTopic(
                    name,
                    tuple(_fetched(partition, o) for partition, o in partitions.items()),
                    None if (info := self.topics.by_name(name)) is None else info.topic_id,
                )
                for name, partitions in offsets.items()
            )
        else:
            topics = tuple(self._fetch_topic(t, offsets) for t in request.topics)
        return OffsetFetchResponseGroup(request.group_id, NONE, topics)

    def _fetch_topic(self, topic: OffsetFetchTopic, offsets: GroupOffsets) -> OffsetFetchResponseTopic:
        if topic.topic_id is None:
            committed = offsets.get(topic.name, {})
            return OffsetFetchResponseTopic(topic.name, tuple(_fetched(p, committed.get(p)) for p in topic.partition_indexes))
        # v10: by topic id. An unknown id is UNKNOWN_TOPIC_ID (KafkaApis); an offset committed by
        # id for another topic of the same name (since re-created) is not this topic's (Kafka 4.2).
        info = self.topics.by_id(topic.topic_id)
        if info is None:
            return OffsetFetchResponseTopic(
                "", tuple(OffsetFetchResponsePartition(p, error_code=ErrorCode.UNKNOWN_TOPIC_ID)
                          for p in topic.partition_indexes), topic.topic_id,
            )
        committed = offsets.get(info.name, {})
        partitions = []
        for p in topic.partition_indexes:
            offset = committed.get(p)
            if offset is not None and offset.topic_id is not None and offset.topic_id != topic.topic_id:
                offset = None
            partitions.append(_fetched(p, offset))
        return OffsetFetchResponseTopic(info.name, tuple(partitions), topic.topic_id)

    # ---- OffsetDelete --------------------------------------------------------------------------

    def delete(self, req: OffsetDelete, fx: Effects) -> None:
        if not req.group_id:
            raise CoordinatorError(ErrorCode.INVALID_GROUP_ID)
        group = self.groups.get(req.group_id)
        if group is None:
            raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND)
        group.validate_offset_delete()
        topics = []
        count = 0
        for topic in req.topics:
            if group.is_subscribed_to_topic(topic.name):
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

    def cleanup_group_metadata(self, fx: Effects) -> None:
        """The periodic scan: expire offsets, then delete Empty groups that have none left."""
        for group in list(self.groups.values()):
            if self._cleanup_expired_offsets(group, fx) and group.is_empty:
                delete_group(group, "expired", fx)

    def _cleanup_expired_offsets(self, group: Group, fx: Effects) -> bool:
        """Tombstone expired offsets of ``group``; True when it has no offsets left."""
        topics = self.group_offsets(group.group_id)
        if not topics:
            return True
        base = group.offset_expiration_base()
        if base is None:
            return False  # e.g. a classic group rebalancing: nothing expires now
        now = fx.now_ms
        retention = self.config.offsets_retention_ms
        all_expired = True
        expired = 0
        for topic, partitions in topics.items():
            if group.is_subscribed_to_topic(topic):
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


def _fetched(partition: int, offset: OffsetCommitValue | None) -> OffsetFetchResponsePartition:
    if offset is None:
        return OffsetFetchResponsePartition(partition)
    return OffsetFetchResponsePartition(partition, offset.offset, offset.leader_epoch, offset.metadata)
