"""Kafka's ACL semantics (StandardAuthorizer), without sockets: which bindings apply, implied
operations, DENY over ALLOW, wildcards, prefixes, and the no-ACL default; filters as Kafka's."""

from __future__ import annotations

import pytest

from coordinator.security.acls import (
    AclBinding,
    AclFilter,
    AclIndex,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    validate_new,
)

TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
Op = AclOperation


def acl(rtype, name, op, permission=ALLOW, pattern=LITERAL, principal="User:alice", host="*") -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, permission)


def allowed(acls, op, rtype, name, principal="User:alice", host="10.0.0.1", default=False) -> bool:
    return AclIndex(acls).authorize(principal, host, op, rtype, name, default)


def test_literal_prefixed_and_wildcard_bindings_apply_by_name() -> None:
    acls = [acl(GROUP, "app", Op.READ), acl(GROUP, "team-", Op.READ, pattern=PREFIXED), acl(TOPIC, "*", Op.READ)]
    assert allowed(acls, Op.READ, GROUP, "app")
    assert not allowed(acls, Op.READ, GROUP, "app2")  # literal is exact
    assert allowed(acls, Op.READ, GROUP, "team-a") and allowed(acls, Op.READ, GROUP, "team-")
    assert not allowed(acls, Op.READ, GROUP, "team")
    assert allowed(acls, Op.READ, TOPIC, "anything")
    assert not allowed(acls, Op.READ, GROUP, "*")  # a group named "*" is not matched by LITERAL app


def test_deny_wins_and_allow_of_read_write_delete_alter_implies_describe() -> None:
    acls = [acl(TOPIC, "t", Op.READ), acl(TOPIC, "t", Op.READ, DENY, principal="User:*", host="10.0.0.9")]
    assert allowed(acls, Op.READ, TOPIC, "t") and allowed(acls, Op.DESCRIBE, TOPIC, "t")
    assert not allowed(acls, Op.READ, TOPIC, "t", host="10.0.0.9")
    assert not allowed(acls, Op.WRITE, TOPIC, "t")
    for op in (Op.WRITE, Op.DELETE, Op.ALTER):
        assert allowed([acl(TOPIC, "t", op)], Op.DESCRIBE, TOPIC, "t")
    assert not allowed([acl(TOPIC, "t", Op.CREATE)], Op.DESCRIBE, TOPIC, "t")
    assert allowed([acl(TOPIC, "t", Op.ALTER_CONFIGS)], Op.DESCRIBE_CONFIGS, TOPIC, "t")
    # A DENY of READ does not deny DESCRIBE (implication is for ALLOW only).
    assert allowed([acl(TOPIC, "t", Op.DESCRIBE), acl(TOPIC, "t", Op.READ, DENY)], Op.DESCRIBE, TOPIC, "t")
    assert allowed([acl(CLUSTER, "kafka-cluster", Op.ALL)], Op.ALTER, CLUSTER, "kafka-cluster")
    assert not allowed([acl(TOPIC, "t", Op.ALL, DENY), acl(TOPIC, "t", Op.READ)], Op.READ, TOPIC, "t")


def test_principal_and_host_must_match_or_be_wildcards() -> None:
    acls = [acl(GROUP, "g", Op.READ, principal="User:bob"), acl(GROUP, "h", Op.READ, principal="User:*"),
            acl(GROUP, "i", Op.READ, host="10.0.0.2")]
    assert not allowed(acls, Op.READ, GROUP, "g") and allowed(acls, Op.READ, GROUP, "g", principal="User:bob")
    assert allowed(acls, Op.READ, GROUP, "h", principal="User:anyone")
    assert not allowed(acls, Op.READ, GROUP, "i") and allowed(acls, Op.READ, GROUP, "i", host="10.0.0.2")


def test_no_acl_on_a_resource_is_the_configured_default_but_any_acl_makes_it_deny() -> None:
    acls = [acl(TOPIC, "owned", Op.READ, principal="User:bob")]
    assert allowed(acls, Op.READ, TOPIC, "free", default=True)
    assert not allowed(acls, Op.READ, TOPIC, "free", default=False)
    assert not allowed(acls, Op.READ, TOPIC, "owned", default=True)


def test_filters_match_as_kafkas_resource_pattern_filter() -> None:
    acls = [acl(TOPIC, "t", Op.READ), acl(TOPIC, "t-", Op.READ, pattern=PREFIXED), acl(TOPIC, "*", Op.WRITE),
            acl(GROUP, "t", Op.READ)]

    def matching(rtype, name, pattern, principal=None, op=Op.ANY):
        f = AclFilter(rtype, name, pattern, principal, None, op, AclPermissionType.ANY)
        return {(a.resource_type, a.resource_name, a.pattern_type) for a in acls if f.matches(a)}

    assert matching(ResourceType.ANY, None, PatternType.ANY) == {(a.resource_type, a.resource_name, a.pattern_type)
                                                                 for a in acls}
    assert matching(TOPIC, "t", PatternType.ANY) == {(TOPIC, "t", LITERAL)}
    assert matching(TOPIC, "t-x", PatternType.MATCH) == {(TOPIC, "t-", PREFIXED), (TOPIC, "*", LITERAL)}
    assert matching(TOPIC, "t", PREFIXED) == set()
    assert matching(TOPIC, None, LITERAL, op=Op.WRITE) == {(TOPIC, "*", LITERAL)}
    assert AclFilter(0, None, 1, None, None, 1, 1).unknown() is not None


@pytest.mark.parametrize(("binding", "message"), [
    (acl(ResourceType.ANY, "x", Op.READ), "Invalid resourceType ANY"),
    (acl(TOPIC, "x", Op.READ, pattern=PatternType.MATCH), "Invalid patternType MATCH"),
    (acl(TOPIC, "x", Op.ANY), "Invalid operation ANY"),
    (acl(TOPIC, "x", Op.READ, permission=AclPermissionType.ANY), "Invalid permissionType ANY"),
    (acl(CLUSTER, "mine", Op.ALTER), "The only valid name for the CLUSTER resource is kafka-cluster"),
    (acl(TOPIC, "", Op.READ), "Invalid empty resource name"),
    (acl(TOPIC, "x", Op.READ, principal="alice"), "Could not parse principal from `alice`"),
])
def test_bindings_that_cannot_be_created_say_why_as_kafka(binding, message) -> None:
    code, text = validate_new(binding)
    assert code == 42 and text.startswith(message)
