"""Schemas for API versions Kafka 4 removed and kio therefore does not generate.

OffsetCommit v0–v1 and OffsetFetch v0 are still sent by old clients (kafka-python and other
pre-KIP-896 libraries), and the coordinator serves them. They are declared here exactly as Kafka's
`OffsetCommitRequest.json`, `OffsetCommitResponse.json`, `OffsetFetchRequest.json` and
`OffsetFetchResponse.json` describe them for those versions, in kio's entity form, so kio's own
readers and writers encode and decode them like any generated entity.
"""

# No `from __future__ import annotations`: kio reads the field types at runtime.

from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader
from kio.schema.response_header.v0.header import ResponseHeader
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32, i64


def _entity(api_key: int, version: int, kind: EntityType) -> Any:
    header = RequestHeader if kind != EntityType.response else ResponseHeader

    def decorate(cls: type) -> type:
        cls.__type__ = kind  # type: ignore[attr-defined]
        cls.__version__ = i16(version)  # type: ignore[attr-defined]
        cls.__flexible__ = False  # type: ignore[attr-defined]
        cls.__api_key__ = i16(api_key)  # type: ignore[attr-defined]
        cls.__header_schema__ = header  # type: ignore[attr-defined]
        return dataclass(frozen=True, slots=True, kw_only=True)(cls)

    return decorate


def _int32() -> Any:
    return field(metadata={"kafka_type": "int32"})


def _int64() -> Any:
    return field(metadata={"kafka_type": "int64"})


def _string() -> Any:
    return field(metadata={"kafka_type": "string"})


def _error() -> Any:
    return field(metadata={"kafka_type": "error_code"})


# -- OffsetCommit v0 -------------------------------------------------------------------------------
@_entity(8, 0, EntityType.nested)
class OffsetCommitRequestPartitionV0:
    partition_index: i32 = _int32()
    committed_offset: i64 = _int64()
    committed_metadata: str | None = _string()


@_entity(8, 0, EntityType.nested)
class OffsetCommitRequestTopicV0:
    name: str = _string()
    partitions: tuple[OffsetCommitRequestPartitionV0, ...]


@_entity(8, 0, EntityType.request)
class OffsetCommitRequestV0:
    group_id: str = _string()
    topics: tuple[OffsetCommitRequestTopicV0, ...]


# -- OffsetCommit v1 -------------------------------------------------------------------------------
@_entity(8, 1, EntityType.nested)
class OffsetCommitRequestPartitionV1:
    partition_index: i32 = _int32()
    committed_offset: i64 = _int64()
    commit_timestamp: i64 = _int64()
    committed_metadata: str | None = _string()


@_entity(8, 1, EntityType.nested)
class OffsetCommitRequestTopicV1:
    name: str = _string()
    partitions: tuple[OffsetCommitRequestPartitionV1, ...]


@_entity(8, 1, EntityType.request)
class OffsetCommitRequestV1:
    group_id: str = _string()
    generation_id_or_member_epoch: i32 = _int32()
    member_id: str = _string()
    topics: tuple[OffsetCommitRequestTopicV1, ...]


# -- OffsetCommit v0/v1 responses (identical layouts) ---------------------------------------------
def _commit_response(version: int) -> tuple[type, type, type]:
    @_entity(8, version, EntityType.nested)
    class OffsetCommitResponsePartition:
        partition_index: i32 = _int32()
        error_code: ErrorCode = _error()

    @_entity(8, version, EntityType.nested)
    class OffsetCommitResponseTopic:
        name: str = _string()
        partitions: tuple[OffsetCommitResponsePartition, ...]

    @_entity(8, version, EntityType.response)
    class OffsetCommitResponse:
        topics: tuple[OffsetCommitResponseTopic, ...]

    return OffsetCommitResponse, OffsetCommitResponseTopic, OffsetCommitResponsePartition


OffsetCommitResponseV0 = _commit_response(0)[0]
OffsetCommitResponseV1 = _commit_response(1)[0]


# -- OffsetFetch v0 --------------------------------------------------------------------------------
@_entity(9, 0, EntityType.nested)
class OffsetFetchRequestTopicV0:
    name: str = _string()
    partition_indexes: tuple[i32, ...] = field(metadata={"kafka_type": "int32"})


@_entity(9, 0, EntityType.request)
class OffsetFetchRequestV0:
    group_id: str = _string()
    topics: tuple[OffsetFetchRequestTopicV0, ...]


@_entity(9, 0, EntityType.nested)
class OffsetFetchResponsePartitionV0:
    partition_index: i32 = _int32()
    committed_offset: i64 = _int64()
    metadata: str | None = _string()
    error_code: ErrorCode = _error()


@_entity(9, 0, EntityType.nested)
class OffsetFetchResponseTopicV0:
    name: str = _string()
    partitions: tuple[OffsetFetchResponsePartitionV0, ...]


@_entity(9, 0, EntityType.response)
class OffsetFetchResponseV0:
    topics: tuple[OffsetFetchResponseTopicV0, ...]


REQUESTS: dict[tuple[int, int], type] = {
    (8, 0): OffsetCommitRequestV0,
    (8, 1): OffsetCommitRequestV1,
    (9, 0): OffsetFetchRequestV0,
}
RESPONSES: dict[tuple[int, int], type] = {
    (8, 0): OffsetCommitResponseV0,
    (8, 1): OffsetCommitResponseV1,
    (9, 0): OffsetFetchResponseV0,
}
