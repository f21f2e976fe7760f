"""This project's private APIs: request keys no Kafka release assigns, with their schemas.

Kafka's API keys are 0–92 (Kafka 4.x; `ApiKeys`), assigned upwards one at a time. A private key is
taken from the other end of the INT16 range, so no Kafka release will ever give it a meaning.
A private API is served but never advertised in ApiVersions: Kafka clients negotiate only what
ApiVersions lists, so none of them ever sends one or sees one. Only this project's own tools (the
admin CLI) ask, and they expect a real Kafka broker not to know the key: it closes the connection
(`ApiKeys.forId` refuses the header), as this server does for any key it does not serve.

DescribeGroupGenerations (v0, not flexible): the generation of each classic group and the generation
each of its members holds, which Kafka's DescribeGroups does not carry. Request: `groups` (group ids).
Response, per group: `error_code` (NONE; GROUP_ID_NOT_FOUND for an unknown group or one that is not
classic; GROUP_AUTHORIZATION_FAILED, NOT_COORDINATOR as DescribeGroups answers them),
`group_state`, `generation_id` and `members` (`member_id`, `generation_id`: the group's
generation, or -1 for a member that joined during the rebalance under way and holds none yet).

DescribeSharePartitions (v0, not flexible): what is in flight in each share partition of a share
group, which no Kafka API answers (DescribeShareGroupOffsets gives the start offset and lag only).
Request: `groups` (group ids). Response, per group: `error_code` (NONE; GROUP_ID_NOT_FOUND for an
unknown group or one that is not a share group; GROUP_AUTHORIZATION_FAILED, NOT_COORDINATOR as
ShareGroupDescribe answers them), `group_id` and `partitions` (`topic_name`, `partition_index`,
`start_offset`, and the number of offsets between the start offset and the first offset never
acquired that are `available`, `acquired`, `acknowledged` and `archived`).

ShareForward (v0, not flexible): a ShareFetch or ShareAcknowledge that a client sent to a process
that does not hold its share group, handed by that process to the one that does (another shard, or
another instance sharing the log upstream; `coordinator/share/forward.py`). Request: `node_id` (the
upstream broker whose listener the client reached: the owner serves the inner request as if it had
arrived on that listener) and `request` (the inner request's whole frame, size prefix and header
included, at the client's version). Response: `error_code` (NONE, or CLUSTER_AUTHORIZATION_FAILED
for a sender that is not a peer) and `response` (the inner response's whole frame; empty when
refused).

Declared in kio's entity form, as `protocol.legacy` declares the versions Kafka removed, so kio's own
readers and writers encode and decode them and `protocol.build` describes them like any other.

A feature that lives outside this package (a plug-in named by `coordinator.plugins`, e.g. the
tests' toy group type) declares its own private API with `declare`, in the same entity form
(`entity`, `string`, `int32`, `error_code` build the fields): the tables below are the only place
the codec and ApiVersions look, so a key declared there is decoded like any other and never
advertised.
"""

# No `from __future__ import annotations`: kio reads the field types at runtime.

from dataclasses import field
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType
from kio.static.primitive import i32, i64

from .legacy import _entity, _error, _int32, _int64, _string

entity, error_code, int32, string = _entity, _error, _int32, _string
"""The entity form's decorator and field makers, for a private API declared outside `protocol/`."""

PRIVATE_KEYS_FROM = 16384
"""A private key is at least this: the upper half of the INT16 range, far above Kafka's keys."""

DESCRIBE_GROUP_GENERATIONS = 32767
"""The highest key an INT16 can carry: as far from Kafka's keys as a key can be."""

DESCRIBE_SHARE_PARTITIONS = 32766
"""The next private key down."""

SHARE_FORWARD = 32765
"""The next one down."""

NAMES: dict[int, str] = {DESCRIBE_GROUP_GENERATIONS: "DescribeGroupGenerations",
                         DESCRIBE_SHARE_PARTITIONS: "DescribeSharePartitions", SHARE_FORWARD: "ShareForward"}
"""Private API key -> its name (CamelCase, as Kafka names its APIs)."""
SNAKE_NAMES: dict[int, str] = {DESCRIBE_GROUP_GENERATIONS: "describe_group_generations",
                               DESCRIBE_SHARE_PARTITIONS: "describe_share_partitions",
                               SHARE_FORWARD: "share_forward"}


@_entity(DESCRIBE_GROUP_GENERATIONS, 0, EntityType.request)
class DescribeGroupGenerationsRequestV0:
    groups: tuple[str, ...] = _string()


@_entity(DESCRIBE_GROUP_GENERATIONS, 0, EntityType.nested)
class DescribedMemberGenerationV0:
    member_id: str = _string()
    generation_id: i32 = _int32()


@_entity(DESCRIBE_GROUP_GENERATIONS, 0, EntityType.nested)
class DescribedGroupGenerationV0:
    error_code: ErrorCode = _error()
    group_id: str = _string()
    group_state: str = _string()
    generation_id: i32 = _int32()
    members: tuple[DescribedMemberGenerationV0, ...]


@_entity(DESCRIBE_GROUP_GENERATIONS, 0, EntityType.response)
class DescribeGroupGenerationsResponseV0:
    groups: tuple[DescribedGroupGenerationV0, ...]


@_entity(DESCRIBE_SHARE_PARTITIONS, 0, EntityType.request)
class DescribeSharePartitionsRequestV0:
    groups: tuple[str, ...] = _string()


@_entity(DESCRIBE_SHARE_PARTITIONS, 0, EntityType.nested)
class DescribedSharePartitionV0:
    topic_name: str = _string()
    partition_index: i32 = _int32()
    start_offset: i64 = _int64()
    available: i32 = _int32()
    acquired: i32 = _int32()
    acknowledged: i32 = _int32()
    archived: i32 = _int32()


@_entity(DESCRIBE_SHARE_PARTITIONS, 0, EntityType.nested)
class DescribedSharePartitionsGroupV0:
    error_code: ErrorCode = _error()
    group_id: str = _string()
    partitions: tuple[DescribedSharePartitionV0, ...]


@_entity(DESCRIBE_SHARE_PARTITIONS, 0, EntityType.response)
class DescribeSharePartitionsResponseV0:
    groups: tuple[DescribedSharePartitionsGroupV0, ...]


def _bytes() -> Any:
    return field(metadata={"kafka_type": "bytes"})


@_entity(SHARE_FORWARD, 0, EntityType.request)
class ShareForwardRequestV0:
    node_id: i32 = _int32()
    request: bytes = _bytes()


@_entity(SHARE_FORWARD, 0, EntityType.response)
class ShareForwardResponseV0:
    error_code: ErrorCode = _error()
    response: bytes = _bytes()


REQUESTS: dict[tuple[int, int], type] = {(DESCRIBE_GROUP_GENERATIONS, 0): DescribeGroupGenerationsRequestV0,
                                         (DESCRIBE_SHARE_PARTITIONS, 0): DescribeSharePartitionsRequestV0,
                                         (SHARE_FORWARD, 0): ShareForwardRequestV0}
RESPONSES: dict[tuple[int, int], type] = {(DESCRIBE_GROUP_GENERATIONS, 0): DescribeGroupGenerationsResponseV0,
                                          (DESCRIBE_SHARE_PARTITIONS, 0): DescribeSharePartitionsResponseV0,
                                          (SHARE_FORWARD, 0): ShareForwardResponseV0}


class PrivateApiError(ValueError):
    """A private API declared where it cannot be: a key in Kafka's range, or one already taken."""


def declare(api_key: int, name: str, snake_name: str, requests: dict[int, type], responses: dict[int, type]) -> None:
    """Declares private API `api_key` (`requests`/`responses`: version -> entity class). Declaring
    the very same classes again is a no-op (a plug-in module imported twice); anything else that
    reuses a key, or a key below `PRIVATE_KEYS_FROM`, raises `PrivateApiError` (one line)."""
    if not PRIVATE_KEYS_FROM <= api_key <= 32767:
        raise PrivateApiError(f"private api {name}: key {api_key} is not in {PRIVATE_KEYS_FROM}..32767")
    if set(requests) != set(responses):
        raise PrivateApiError(f"private api {name}: requests and responses declare different versions")
    mine = ({(api_key, v): c for v, c in requests.items()}, {(api_key, v): c for v, c in responses.items()})
    if api_key in NAMES:
        taken = ({k: c for k, c in REQUESTS.items() if k[0] == api_key},
                 {k: c for k, c in RESPONSES.items() if k[0] == api_key})
        if NAMES[api_key] == name and taken == mine:
            return
        raise PrivateApiError(f"private api {name}: key {api_key} is already {NAMES[api_key]}")
    NAMES[api_key] = name
    SNAKE_NAMES[api_key] = snake_name
    REQUESTS.update(mine[0])
    RESPONSES.update(mine[1])
