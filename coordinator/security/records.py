"""The security records (types 1001-1002, ours): SCRAM credentials and ACLs, and their declarations.

Kafka keeps SCRAM credentials and ACLs in its metadata log (``UserScramCredentialRecord``,
``AccessControlEntryRecord``); here they live in the coordinator's log, so they survive failover like
groups do. They belong to no group: a change to them is a coordinator-wide entry. ``store.py``
replays them; its registration lists :data:`RECORD_TYPES`, which is how the shard's codec (and the
log tools', ``CODEC``) knows them: the core names no security type.
"""

from __future__ import annotations

from coordinator.core.record_codec import RecordCodec, RecordStruct, RecordTypeDecl
from coordinator.core.records import BUILTIN_RECORD_TYPES

SCRAM_CREDENTIAL = 1001
ACL = 1002


class ScramCredentialKey(RecordStruct, frozen=True):
    user: str
    mechanism: int  # Kafka's ScramMechanism type: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512


class ScramCredentialValue(RecordStruct, frozen=True):
    """Kafka's UserScramCredentialRecord: never the password, only what verifies a proof."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


class AclKey(RecordStruct, frozen=True):
    """One ACL binding (Kafka's AccessControlEntryRecord without its id: the binding is the identity)."""

    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


class AclValue(RecordStruct, frozen=True):
    """Present = the ACL exists; a tombstone deletes it."""


RECORD_TYPES = (
    RecordTypeDecl(SCRAM_CREDENTIAL, "ScramCredential", ScramCredentialKey, {0: ScramCredentialValue}),
    RecordTypeDecl(ACL, "Acl", AclKey, {0: AclValue}),
)

CODEC = RecordCodec((*BUILTIN_RECORD_TYPES, *RECORD_TYPES))
"""The built-in records and the security records: what a node's log holds (tools that read it)."""
