"""The streams group type's record types as the shard declares them (Kafka's ids 17, 19-23): the
same structs, ids and value versions as ``records.RECORD_TYPES``, in the shard's ``RecordTypeDecl``
shape, so the shard's codec writes and reads them like every other declared type."""

from __future__ import annotations

from coordinator.core.record_codec import RecordTypeDecl

from .records import RECORD_TYPES as _SPECS

RECORD_TYPES: tuple[RecordTypeDecl, ...] = tuple(
    RecordTypeDecl(spec.type_id, spec.name, spec.key, dict(spec.values), spec.write_version) for spec in _SPECS)

RECORD_KEYS: tuple[type, ...] = tuple(decl.key for decl in RECORD_TYPES)
