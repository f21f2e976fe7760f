"""Kafka's ACL model: resource types, pattern types, operations, permissions, bindings and filters.

Numbers are Kafka's wire values (`PatternType`, `AclPermissionType`; `ResourceType` and `AclOperation`
are the API contract's, `api/authorization.py`, so a declaration can name them).
A binding is one ACL: (resource type, resource name, pattern type, principal, host, operation,
permission). Rules, as Kafka's:

- creating: the resource type, pattern type (LITERAL or PREFIXED), operation and permission must be
  specific (not ANY/UNKNOWN/MATCH); the resource name must not be empty; a CLUSTER resource is
  named `kafka-cluster`; the principal is `Type:name` (`User:*` is every user); the host is an
  address or `*`.
- filters (DescribeAcls, DeleteAcls): ANY matches everything of a kind, a null name or principal
  or host matches every one; pattern type MATCH matches the bindings that would apply to the named
  resource (the literal name, the literal wildcard `*`, and prefixes of it) - `ResourcePatternFilter`.
- authorizing (`AclIndex.authorize`, Kafka's StandardAuthorizer): the bindings that apply to a
  resource are its LITERAL name, the LITERAL `*`, and every PREFIXED binding whose name is a prefix
  of it, for the principal itself or `User:*`, from the client's address or `*`. A DENY that applies
  wins; otherwise an ALLOW that applies allows. ALLOW of READ, WRITE, DELETE or ALTER implies
  DESCRIBE; ALLOW of ALTER_CONFIGS implies DESCRIBE_CONFIGS; ALL is every operation. With no binding
  on the resource at all (any principal, any operation) the answer is
  `allow.everyone.if.no.acl.found`; with bindings but none allowing, it is denied.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from enum import IntEnum
from typing import NamedTuple

from protocol.errors import ErrorCode

from ..api.authorization import CLUSTER_NAME, AclOperation, ResourceType

WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


IMPLIES_DESCRIBE = frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE,
                              AclOperation.ALTER})
IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})


class AclBinding(NamedTuple):
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


class AclFilter(NamedTuple):
    resource_type: int
    resource_name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission_type: int

    def unknown(self) -> str | None:
        """Kafka's `AclBindingFilter.isUnknown`: why the filter can match nothing, or None."""
        for value, kind in ((self.resource_type, ResourceType), (self.pattern_type, PatternType),
                            (self.operation, AclOperation), (self.permission_type, AclPermissionType)):
            if value not in kind._value2member_map_ or value == 0:
                return f"Unknown {kind.__name__} {value} in the filter."
        return None

    def matches(self, acl: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != acl.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and self.pattern_type != acl.pattern_type:
            return False
        if self.resource_name is not None:
            if self.pattern_type in (PatternType.ANY, acl.pattern_type):
                if self.resource_name != acl.resource_name:
                    return False
            elif acl.pattern_type == PatternType.LITERAL:  # MATCH
                if self.resource_name != acl.resource_name and acl.resource_name != WILDCARD:
                    return False
            elif not self.resource_name.startswith(acl.resource_name):  # MATCH against PREFIXED
                return False
        if self.principal is not None and self.principal != acl.principal:
            return False
        if self.host is not None and self.host != acl.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != acl.operation:
            return False
        return self.permission_type == AclPermissionType.ANY or self.permission_type == acl.permission_type


def validate_new(acl: AclBinding) -> tuple[int, str] | None:
    """Why a binding cannot be created ((INVALID_REQUEST, Kafka's message)), or None."""
    def name(kind: type[IntEnum], value: int) -> str:
        return kind(value).name if value in kind._value2member_map_ else str(value)

    if acl.resource_type not in ResourceType._value2member_map_ or acl.resource_type in (0, 1):
        return ErrorCode.INVALID_REQUEST, f"Invalid resourceType {name(ResourceType, acl.resource_type)}"
    if acl.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return ErrorCode.INVALID_REQUEST, f"Invalid patternType {name(PatternType, acl.pattern_type)}"
    if acl.operation not in AclOperation._value2member_map_ or acl.operation in (0, 1):
        return ErrorCode.INVALID_REQUEST, f"Invalid operation {name(AclOperation, acl.operation)}"
    if acl.permission_type not in (AclPermissionType.DENY, AclPermissionType.ALLOW):
        return ErrorCode.INVALID_REQUEST, f"Invalid permissionType {name(AclPermissionType, acl.permission_type)}"
    if acl.resource_type == ResourceType.CLUSTER and acl.resource_name != CLUSTER_NAME:
        return ErrorCode.INVALID_REQUEST, f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not acl.resource_name:
        return ErrorCode.INVALID_REQUEST, "Invalid empty resource name"
    kind, sep, who = acl.principal.partition(":")
    if not sep or not kind or not who:
        return ErrorCode.INVALID_REQUEST, (f"Could not parse principal from `{acl.principal}` (no colon is present "
                                           "separating the principal type from the principal name)")
    if not acl.host:
        return ErrorCode.INVALID_REQUEST, "Invalid empty host"
    return None


def _applies(acl: AclBinding, principal: str, host: str, operation: int) -> int | None:
    """StandardAuthorizerData.findResult: DENY, ALLOW, or None (the binding does not apply)."""
    if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
        return None
    if acl.host != WILDCARD and acl.host != host:
        return None
    if acl.operation != AclOperation.ALL:
        if acl.permission_type == AclPermissionType.ALLOW:
            if operation == AclOperation.DESCRIBE:
                if acl.operation not in IMPLIES_DESCRIBE:
                    return None
            elif operation == AclOperation.DESCRIBE_CONFIGS:
                if acl.operation not in IMPLIES_DESCRIBE_CONFIGS:
                    return None
            elif acl.operation != operation:
                return None
        elif acl.operation != operation:
            return None
    return acl.permission_type


class AclIndex:
    """The ACLs by resource type and name, for authorization; rebuilt cheaply on every change."""

    def __init__(self, acls: Iterable[AclBinding] = ()) -> None:
        self._literal: dict[tuple[int, str], list[AclBinding]] = {}
        self._prefixed: dict[int, dict[str, list[AclBinding]]] = {}
        for acl in acls:
            if acl.pattern_type == PatternType.PREFIXED:
                self._prefixed.setdefault(acl.resource_type, {}).setdefault(acl.resource_name, []).append(acl)
            else:
                self._literal.setdefault((acl.resource_type, acl.resource_name), []).append(acl)

    def candidates(self, resource_type: int, name: str) -> Iterator[AclBinding]:
        """Every binding that applies to the resource by name (principal, host, operation aside)."""
        yield from self._literal.get((resource_type, name), ())
        if name != WILDCARD:
            yield from self._literal.get((resource_type, WILDCARD), ())
        prefixed = self._prefixed.get(resource_type)
        if prefixed:
            if len(prefixed) < len(name):
                for prefix, acls in prefixed.items():
                    if name.startswith(prefix):
                        yield from acls
            else:
                for end in range(1, len(name) + 1):
                    yield from prefixed.get(name[:end], ())

    def authorize(self, principal: str, host: str, operation: int, resource_type: int, name: str,
                  allow_if_no_acl: bool) -> bool:
        found = allowed = False
        for acl in self.candidates(resource_type, name):
            found = True
            result = _applies(acl, principal, host, operation)
            if result == AclPermissionType.DENY:
                return False
            if result == AclPermissionType.ALLOW:
                allowed = True
        return allowed or (allow_if_no_acl and not found)
