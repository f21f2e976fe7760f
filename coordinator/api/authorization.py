"""What an API declares about authorization, and the vocabulary to say it.

Kafka's ACL vocabulary (`ResourceType`, `AclOperation`: wire values) and its authorized-operations
bitfields (KIP-430) live here, at the bottom, so a handler can ask `allowed(ctx, op, type, name)`
and an API declaration can name a rule without importing the security feature. The *mechanism*
(ACLs, the store, the cached decisions) is security's: `ctx.authz` is its `Authorizer` when
`authorizer.class.name` is set, else None, and the rules below are interpreted by
`security/checks.py`, which security installs into the node at start-up.

Every API declares one rule (`ApiDeclaration.authorization`); one that declares none stops
start-up (closed by default). The rules, as data:

- `Unchecked(reason)`: Kafka asks no ACL for it (ApiVersions, the SASL exchange);
- `InHandler(what)`: the handler asks `ctx.authz` itself, as Kafka's KafkaApis does for it
  (Metadata, FindCoordinator, the topic and ACL APIs, the data plane);
- the group rules (`GroupMember`, `CommitOffsets`, `FetchOffsets`, `DescribeEachGroup`,
  `ListVisibleGroups`, `DeleteEachGroup`, `JoinWithSubscription`, `JoinWithTopology`): asked before the shard sees the
  request; each refuses the request whole, trims it to what the principal may touch, or answers it
  outright (`security/checks.py` says how each does).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .registry import RequestContext

CLUSTER_NAME = "kafka-cluster"
NOT_REQUESTED = -(2**31)
"""An authorized-operations field the request did not ask for (Int.MinValue, the schemas' default)."""


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE,
                                               AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE)
CLUSTER_ACTION, IDEMPOTENT_WRITE = AclOperation.CLUSTER_ACTION, AclOperation.IDEMPOTENT_WRITE
TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
                                          ResourceType.TRANSACTIONAL_ID)


def allowed(ctx: RequestContext, operation: int, resource_type: int, name: str) -> bool:
    """`ctx.authz` allows it, or there is no authorizer."""
    authz = ctx.authz
    return authz is None or bool(authz.allowed(ctx, operation, resource_type, name))


# ---- authorized operations (KIP-430) ---------------------------------------------------------

SUPPORTED: dict[int, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
                         AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
                         AclOperation.ALTER_CONFIGS),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE, AclOperation.DESCRIBE_CONFIGS,
                         AclOperation.ALTER_CONFIGS),
    ResourceType.CLUSTER: (AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
                           AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                           AclOperation.DESCRIBE),
}
"""Kafka's `AclEntry.supportedOperations` for the resource types served here."""


def to_32bit_field(operations: tuple[int, ...] | list[int]) -> int:
    """Kafka's `Utils.to32BitField`: bit n for operation code n."""
    field = 0
    for operation in operations:
        field |= 1 << operation
    return field


ALL_OPERATIONS = {resource_type: to_32bit_field(ops) for resource_type, ops in SUPPORTED.items()}
"""What a broker without an authorizer answers: every supported operation (group: 3400)."""


def authorized_operations(ctx: RequestContext, resource_type: int, name: str) -> int:
    """Kafka's `AuthHelper.authorizedOperations`: the supported operations the authorizer allows."""
    if ctx.authz is None:
        return ALL_OPERATIONS[resource_type]
    return to_32bit_field([op for op in SUPPORTED[resource_type] if allowed(ctx, op, resource_type, name)])


def cluster_operations(ctx: RequestContext) -> int:
    """The cluster's field when asked for: 0 unless the principal may DESCRIBE the cluster."""
    if not allowed(ctx, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return 0
    return authorized_operations(ctx, ResourceType.CLUSTER, CLUSTER_NAME)


# ---- the rules an API declares ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Rule:
    """An API's authorization rule: data, interpreted by the security feature."""


@dataclass(frozen=True, slots=True)
class Unchecked(Rule):
    """Kafka authorizes nothing for this API; `reason` says why (read by whoever reviews it)."""

    reason: str


@dataclass(frozen=True, slots=True)
class InHandler(Rule):
    """The handler asks `ctx.authz` itself; `what` names the resources and operations it asks."""

    what: str


@dataclass(frozen=True, slots=True)
class GroupMember(Rule):
    """`operation` on the request's `group_id`, else the whole request is GROUP_AUTHORIZATION_FAILED."""

    operation: int


@dataclass(frozen=True, slots=True)
class CommitOffsets(Rule):
    """OffsetCommit, OffsetDelete: `group_operation` on the group (else refused whole), then
    `topic_operation` on each topic (its partitions refused TOPIC_AUTHORIZATION_FAILED).
    `topics_by_id`: the versions that name topics by id resolve them through the topics image;
    `answer_when_none_left`: with every topic refused Kafka answers without the coordinator."""

    group_operation: int
    topic_operation: int
    topics_by_id: bool
    answer_when_none_left: bool


@dataclass(frozen=True, slots=True)
class FetchOffsets(Rule):
    """OffsetFetch: DESCRIBE each group, DESCRIBE each topic; "all topics" shows authorized ones."""


@dataclass(frozen=True, slots=True)
class DescribeEachGroup(Rule):
    """DESCRIBE each group named in `field`; a refused one is answered `refused_entry(group_id,
    GROUP_AUTHORIZATION_FAILED)`; authorized operations are the principal's.
    `hide_groups_using_hidden_topics`: a group whose assignments name a topic the principal may
    not DESCRIBE is TOPIC_AUTHORIZATION_FAILED (ConsumerGroupDescribe, KAFKA-18813)."""

    field: str
    refused_entry: Callable[[str, int], dict[str, Any]]
    hide_groups_using_hidden_topics: bool = False


@dataclass(frozen=True, slots=True)
class ListVisibleGroups(Rule):
    """DESCRIBE cluster shows every group, else only the groups the principal may DESCRIBE."""


@dataclass(frozen=True, slots=True)
class DeleteEachGroup(Rule):
    """DELETE each group named in `field`; refused ones answered in `answer_field`."""

    field: str
    answer_field: str


@dataclass(frozen=True, slots=True)
class JoinWithSubscription(Rule):
    """READ the group, then DESCRIBE each subscribed topic name (refused whole)."""


@dataclass(frozen=True, slots=True)
class JoinWithTopology(Rule):
    """StreamsGroupHeartbeat: READ the group, then DESCRIBE each topic a topology names (refused
    whole). CREATE on the internal topics to create is the handler's to ask, after the core."""
