"""The rebalance history's row schema: the ONE definition of its fields, types and version.

Everything that writes or reads history rows uses this module: the coordinator's writer
(`coordinator.history.writer`), `coordinator history export` (JSON lines and Parquet), the Spark
pipeline (`pipeline/`, which builds its explicit read schema from `FIELDS`) and the synthetic
generator. It imports nothing outside the standard library so the pipeline can import it without
the server's dependencies.

Format
------
A history is a sequence of rows, one per observed event (plus the partition rows the assignment
tracker derives, see `coordinator.history.rows`). On disk and in a JSON-lines export each row is one
JSON object; a field whose value is null is omitted. Parquet exports carry every field as a column.
A partitioned Parquet dataset (`coordinator history export --format parquet-partitioned`, the
synthetic generator) puts each row under `day=YYYY-MM-DD/bucket=B/` (`day_of`, `group_bucket`): a
group's rows of one day are in one directory, and a daily job reads only that day's directories.

Versioning rules
----------------
- `SCHEMA_VERSION` is written into every row (field `v`).
- Adding a field (at the end of `FIELDS`) or a new `kind` is backward compatible and keeps
  `SCHEMA_VERSION`: readers treat a missing field as null and ignore kinds they do not know.
- Renaming, retyping or changing the meaning of a field is incompatible: bump `SCHEMA_VERSION` and
  keep readers able to read the previous version.

Version history: 1 — first version (field `old_group_type` and kind `group_type_changed` added
compatibly later).

Timestamps are wall-clock milliseconds since the epoch (UTC) taken by the writer when it observed the
event: the core's domain events carry no time. `seq` orders rows observed in the same millisecond
(it increases by one per row and continues across segments and restarts of one data directory).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

SCHEMA_VERSION: Final = 1


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    type: str
    """One of: "int32", "int64", "float64", "string", "topic_partitions" (see `TOPIC_PARTITIONS`)."""
    doc: str
    required: bool = False
    """Present in every row."""


TOPIC_PARTITIONS: Final = "topic_partitions"
"""A list of `{"topic": str, "partitions": [int, ...]}` objects, topics and partitions sorted."""

FIELDS: Final[tuple[Field, ...]] = (
    Field("v", "int32", "Schema version of the row (SCHEMA_VERSION when it was written).", True),
    Field("ts_ms", "int64", "Wall-clock time the writer observed the event, ms since the epoch (UTC).", True),
    Field("seq", "int64", "Row sequence number of the writing coordinator; orders rows within one ms.", True),
    Field("node_id", "int32", "node.id of the coordinator that wrote the row.", True),
    Field("cluster_id", "string", "cluster.id of the coordinator that wrote the row.", True),
    Field("kind", "string", "What happened: one of KINDS.", True),
    Field("group_id", "string", "The group.", True),
    Field("group_type", "string", "classic or consumer; empty when the event does not say."),
    Field("member_id", "string", "The member concerned, if any."),
    Field("group_instance_id", "string", "The member's static instance id, if it has one."),
    Field("reason", "string", "Why (rebalance reason, leave reason, fence reason, deletion reason)."),
    Field("generation_id", "int32", "Classic groups: the generation (left behind when starting, new when completed)."),
    Field("group_epoch", "int32", "Consumer groups: the group epoch (the new one for group_epoch_bumped) or assignment epoch."),
    Field("member_epoch", "int32", "Consumer groups: the member's epoch after the change."),
    Field("old_state", "string", "group_state_changed: the state left (empty when the group was created)."),
    Field("new_state", "string", "group_state_changed: the state entered."),
    Field("member_count", "int32", "Members of the group at the time (rebalance completed, target computed)."),
    Field("partition_count", "int32", "Partitions concerned: listed in `partitions`, held by a fenced member, or assigned by the assignor."),
    Field("assigned_count", "int32", "member_assignment_changed: partitions newly usable by the member."),
    Field("revoked_count", "int32", "member_assignment_changed: partitions the member may no longer use."),
    Field("partitions", TOPIC_PARTITIONS, "partitions_revoked / partitions_assigned: the partitions."),
    Field("duration_ms", "float64", "The coordinator's own measurement: rebalance duration, assignor run time."),
    Field("assignor", "string", "target_assignment_computed: the server-side assignor."),
    Field("client_id", "string", "member_joined: the client's client.id."),
    Field("client_host", "string", "member_joined: the client's address."),
    Field("detail", "string", "Other fields of the event as a JSON object (new event kinds before they get columns)."),
    Field("old_group_type", "string", "group_type_changed: the type the group had before (group_type is the new one)."),
)

FIELD_NAMES: Final = tuple(f.name for f in FIELDS)
FIELDS_BY_NAME: Final = {f.name: f for f in FIELDS}

# The row kinds. Names are stable: the pipeline and dashboards select on them.
KINDS: Final[dict[str, str]] = {
    "group_state_changed": "A group changed state (Kafka's state strings).",
    "rebalance_started": "Classic: a rebalance began (PreparingRebalance); generation_id is the generation left behind.",
    "rebalance_completed": "Classic: the group became Stable (or Empty) at generation_id; duration_ms is the core's measurement.",
    "group_epoch_bumped": "Consumer: the group epoch was bumped to group_epoch (a new target assignment is due).",
    "target_assignment_computed": "Consumer: the assignor ran for group_epoch.",
    "member_assignment_changed": "Consumer: a member's usable partitions changed; member_epoch is its epoch after reconciling.",
    "member_joined": "A member was admitted.",
    "member_left": "A member was removed; reason says why (leave-group, session-timeout, rebalance-timeout, ...).",
    "member_fenced": "Consumer: the coordinator removed a member (session or rebalance timeout).",
    "session_expired": "A member's session timed out (both group types).",
    "static_member_replaced": "A static member came back under a new member id (detail names the old one).",
    "partitions_revoked": "Derived: partitions a member stopped owning (revoked, dropped, or released by leaving).",
    "partitions_assigned": "Derived: partitions a member started owning.",
    "group_deleted": "A group was removed.",
    "group_type_changed": "The group id is now of another type (group_type) than when last seen (old_group_type): "
                          "an empty classic group taken over by a KIP-848 heartbeat, a group re-created with the "
                          "other protocol after deletion, or (later) a live migration. Written by the history "
                          "writer before the first row of the new type.",
}

# The kinds the pipeline treats as the start and the end of a rebalance.
REBALANCE_START_KINDS: Final = ("rebalance_started", "group_epoch_bumped")
REBALANCE_END_STATES: Final = ("Stable", "Empty")
"""A rebalance ends when its group enters one of these states (group_state_changed): for classic
groups that is the moment the leader's assignment is stored; for consumer groups the moment every
member has reconciled to the target assignment epoch (Kafka's Stable)."""


# ---- the partitioned layout (Parquet datasets: exports and the synthetic generator) ------------------

PARTITION_BUCKETS: Final = 16
"""Group-hash buckets per day in a partitioned dataset: enough files per day for both cores of a
small machine (and more executors on a cluster), few enough that a day of a small coordinator is
not thousands of tiny files."""
DAY_MS: Final = 86_400_000


def group_bucket(group_id: str) -> int:
    """The bucket of a group: CRC-32 of its UTF-8 id modulo PARTITION_BUCKETS (stable everywhere)."""
    import zlib

    return zlib.crc32(group_id.encode()) % PARTITION_BUCKETS


def day_of(ts_ms: int) -> str:
    """The UTC day (YYYY-MM-DD) of `ts_ms`: the `day=` partition of a row."""
    import datetime

    return (datetime.date(1970, 1, 1) + datetime.timedelta(days=ts_ms // DAY_MS)).isoformat()


def iso_ms(ts_ms: int) -> str:
    """`ts_ms` as ISO-8601 UTC with milliseconds, for humans."""
    import datetime

    moment = datetime.datetime.fromtimestamp(ts_ms / 1000, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts_ms % 1000:03d}Z"


def parse_time(text: str) -> int:
    """Milliseconds since the epoch from an integer string or ISO-8601 (naive means UTC)."""
    import datetime

    raw = text.strip()
    if raw.lstrip("-").isdigit():
        return int(raw)
    moment = datetime.datetime.fromisoformat(raw.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return int(moment.timestamp() * 1000)
