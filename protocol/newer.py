"""Schemas for API versions newer than the ones kio 0.6.5 generates.

kio 0.6.5 was generated from Kafka 4.2's message JSON, so it knows StreamsGroupHeartbeat v0 only.
Apache Kafka 4.4 and trunk add v1 (KIP-1331, KAFKA-20744), which the trunk Java client negotiates
and which is the only version on which it reports task offsets (what warm-up promotion needs):

- the request v1 has exactly v0's fields: it exists so that the response v1 is negotiated and the
  broker may send status 6 (MISSING_CLIENT_TAGS) to a client that understands it;
- the response v1 drops v0's int32 recovery lag (trunk renames it ``AcceptableRecoveryLagLegacy``,
  v0 only), adds ``AcceptableRecoveryLag`` int64 (default -1: "not supported") right after
  ``TaskOffsetIntervalMs``, and ``TopologyDescriptionRequired`` bool right after ``WarmupTasks``.

Declared in kio's entity form (as `protocol.legacy` declares the versions Kafka removed), reusing
kio's v0 nested entities where the layout is the same, so kio's own readers and writers encode and
decode them and `protocol.build` describes them like any generated entity. Field names follow kio's
v0 names (``heartbeat_interval``, ``task_offset_interval``), so one version-free description serves
both versions; ``acceptable_recovery_lag`` is the int64 field on v1 and the int32 legacy field on
v0, which Kafka never sets (a handler leaves it out for v0).
"""

# No `from __future__ import annotations`: kio reads the field types at runtime.

import dataclasses
from dataclasses import field
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.response_header.v1.header import ResponseHeader
from kio.schema.streams_group_heartbeat.v0 import request as heartbeat_v0_request
from kio.schema.streams_group_heartbeat.v0 import response as heartbeat_v0
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32, i32Timedelta, i64

STREAMS_GROUP_HEARTBEAT = 88


def _same_fields_as(cls: Any, version: int) -> Any:
    """A request entity with `cls`'s fields, declared for another version (a version that only
    exists to negotiate the response's)."""
    fields = [(f.name, f.type, dataclasses.field(default=f.default, metadata=f.metadata)
               if f.default is not dataclasses.MISSING else dataclasses.field(metadata=f.metadata))
              for f in dataclasses.fields(cls)]
    new = dataclasses.make_dataclass(f"{cls.__name__}V{version}", fields, frozen=True, slots=True, kw_only=True)
    for attr in ("__type__", "__flexible__", "__api_key__", "__header_schema__"):
        setattr(new, attr, getattr(cls, attr))
    new.__version__ = i16(version)  # type: ignore[attr-defined]
    new.__module__ = __name__
    return new


StreamsGroupHeartbeatRequestV1 = _same_fields_as(heartbeat_v0_request.StreamsGroupHeartbeatRequest, 1)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class StreamsGroupHeartbeatResponseV1:
    __type__ = EntityType.response
    __version__ = i16(1)
    __flexible__ = True
    __api_key__ = i16(STREAMS_GROUP_HEARTBEAT)
    __header_schema__ = ResponseHeader
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    error_message: str | None = field(metadata={"kafka_type": "string"}, default=None)
    member_id: str = field(metadata={"kafka_type": "string"})
    member_epoch: i32 = field(metadata={"kafka_type": "int32"})
    heartbeat_interval: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    task_offset_interval: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    acceptable_recovery_lag: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))
    status: tuple[heartbeat_v0.Status, ...] | None
    active_tasks: tuple[heartbeat_v0.TaskIds, ...] | None
    standby_tasks: tuple[heartbeat_v0.TaskIds, ...] | None
    warmup_tasks: tuple[heartbeat_v0.TaskIds, ...] | None
    topology_description_required: bool = field(metadata={"kafka_type": "bool"}, default=False)
    endpoint_information_epoch: i32 = field(metadata={"kafka_type": "int32"})
    partitions_by_user_endpoint: tuple[heartbeat_v0.EndpointToPartitions, ...] | None


REQUESTS: dict[tuple[int, int], type] = {(STREAMS_GROUP_HEARTBEAT, 1): StreamsGroupHeartbeatRequestV1}
RESPONSES: dict[tuple[int, int], type] = {(STREAMS_GROUP_HEARTBEAT, 1): StreamsGroupHeartbeatResponseV1}
