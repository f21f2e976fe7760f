"""The offsets' record type: OffsetCommit (Kafka's type 1), declared as every owner of records does.

``OffsetManager`` (``offsets.py``) replays it; its registration lists :data:`RECORD_TYPES`. Also the
fast path of loading a log (``OffsetManager.replay_loaded``): the value of the version written today
decoded without a lookup, and the key as a plain tuple (keys never change shape).
"""

from __future__ import annotations

from uuid import UUID

import msgspec

from coordinator.core.record_codec import RecordStruct, RecordTypeDecl

OFFSET_COMMIT = 1


class OffsetCommitKey(RecordStruct, frozen=True):
    group: str
    topic: str
    partition: int


class OffsetCommitValue(RecordStruct, frozen=True):
    offset: int
    leader_epoch: int = -1  # -1 = none
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1  # -1 = none (only OffsetCommit v2-4 with a retention time sets it)
    # Kafka 4.2's ``topicId`` tag: the id of the topic the commit named (OffsetCommit v10 names
    # topics by id). An OffsetFetch v10 for another id of that name (the topic was re-created) does
    # not see this offset. None for commits by name.
    topic_id: UUID | None = None


RECORD_TYPES = (RecordTypeDecl(OFFSET_COMMIT, "OffsetCommit", OffsetCommitKey, {0: OffsetCommitValue}),)

OFFSET_COMMIT_VALUE_VERSION = RECORD_TYPES[0].write_version
decode_offset_commit_key = msgspec.msgpack.Decoder(tuple[str, str, int]).decode
decode_offset_commit_value = msgspec.msgpack.Decoder(OffsetCommitValue).decode
