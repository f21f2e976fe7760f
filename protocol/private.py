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

Declared in kio's entity form, as `protocol.legacy` declares the versions Kafka removed, so kio's own
readers and writers encode and decode them and `protocol.build` describes them like any other.
"""

# No `from __future__ import annotations`: kio reads the field types at runtime.

from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType
from kio.static.primitive import i32

from .legacy import _entity, _error, _int32, _string

DESCRIBE_GROUP_GENERATIONS = 32767
"""The highest key an INT16 can carry: as far from Kafka's keys as a key can be."""

NAMES: dict[int, str] = {DESCRIBE_GROUP_GENERATIONS: "DescribeGroupGenerations"}
"""Private API key -> its name (CamelCase, as Kafka names its APIs)."""
SNAKE_NAMES: dict[int, str] = {DESCRIBE_GROUP_GENERATIONS: "describe_group_generations"}


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


REQUESTS: dict[tuple[int, int], type] = {(DESCRIBE_GROUP_GENERATIONS, 0): DescribeGroupGenerationsRequestV0}
RESPONSES: dict[tuple[int, int], type] = {(DESCRIBE_GROUP_GENERATIONS, 0): DescribeGroupGenerationsResponseV0}
