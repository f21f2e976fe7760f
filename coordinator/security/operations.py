"""Kafka's authorized-operations bitfields (KIP-430): what a principal may do with a resource.

`authorized_operations(ctx, resource_type, name)` is Kafka's `AuthHelper.authorizedOperations`: the
operations `AclEntry.supportedOperations` lists for the resource type, kept when the authorizer
allows them (all of them without an authorizer), as `Utils.to32BitField` packs them (bit n set for
the operation whose code is n). A field the request did not ask for is `NOT_REQUESTED`
(Int.MinValue, the schemas' default). The cluster's operations are shown only to a principal that
may DESCRIBE the cluster (0 otherwise), as Kafka's Metadata and DescribeCluster do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .acls import AclOperation, ResourceType
from .authorizer import CLUSTER_NAME, allowed

if TYPE_CHECKING:
    from ..api.registry import RequestContext

NOT_REQUESTED = -(2**31)

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
    if ctx.authz is None:
        return ALL_OPERATIONS[resource_type]
    return to_32bit_field([op for op in SUPPORTED[resource_type] if allowed(ctx, op, resource_type, name)])


def cluster_operations(ctx: RequestContext) -> int:
    """The cluster's field when asked for: 0 unless the principal may DESCRIBE the cluster."""
    if not allowed(ctx, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return 0
    return authorized_operations(ctx, ResourceType.CLUSTER, CLUSTER_NAME)
