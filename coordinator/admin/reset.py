"""`offsets reset`: plan new committed offsets for a group, and commit the plan only when asked.

Kafka's `kafka-consumer-groups --reset-offsets` (ConsumerGroupCommand + GroupOffsetsResetter) is the
model, option for option:

- The group must be inactive: Empty or Dead (an unknown group counts as Dead). Anything else is
  refused with Kafka's message; nothing is read or written.
- Scope: `--all-topics` is every partition the group has a committed offset for; `--topic T` is every
  partition of T, `--topic T:0,2` only those (repeatable, mixed). Unknown topics or partitions and
  partitions without a leader are refused before anything is computed.
- Selector, one of:
  `earliest`/`latest`: the log start / log end offset (ListOffsets -2 / -1);
  `offset N`: N, clamped to [earliest, latest];
  `shift N`: committed + N, clamped to [earliest, latest]; refused for a partition with no committed
  offset (there is nothing to shift);
  `current`: the committed offset; the log end for a partition with none;
  `timestamp T` (`--to-datetime`, `--by-duration`): the first offset whose record timestamp is >= T;
  a partition with no such record falls back to its log end, with a warning, as Kafka does.
- The plan is returned whatever happens; `execute_plan` commits it with one OffsetCommit at the group
  coordinator with generation -1 and an empty member id (what Kafka's admin client sends for
  alterConsumerGroupOffsets). The CLI commits only with `--execute`; the default is a dry run.

A share group (KIP-932) is reset as `kafka-share-groups.sh --reset-offsets` does: it must be Empty;
its "committed" offsets are the start offsets of the partitions it has state for
(DescribeShareGroupOffsets, `--all-topics` is those); `shift` is refused (Kafka's share command has
no `--shift-by`); the plan is executed with one AlterShareGroupOffsets, which starts each partition
afresh at its new offset (what was in flight is forgotten).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

from . import share
from .client import OFFSET_COMMIT, AdminClient, AdminError, Connection, error_name
from .groups import committed_offsets, group_state
from .log_offsets import EARLIEST, LATEST, NO_OFFSET, LogOffset, list_log_offsets

INACTIVE_STATES = ("Empty", "Dead")

SelectorKind = Literal["earliest", "latest", "offset", "shift", "current", "timestamp"]


@dataclass(frozen=True, slots=True)
class Selector:
    kind: SelectorKind
    value: int | None = None
    """`offset`: the offset; `shift`: the shift; `timestamp`: epoch milliseconds; otherwise None."""


@dataclass(frozen=True, slots=True)
class TopicScope:
    topic: str
    partitions: tuple[int, ...] | None = None
    """None: every partition of the topic."""


@dataclass(frozen=True, slots=True)
class Scope:
    all_topics: bool = False
    topics: tuple[TopicScope, ...] = ()


@dataclass(slots=True)
class OffsetChange:
    topic: str
    partition: int
    previous_offset: int | None
    new_offset: int
    error: str | None = None


@dataclass(slots=True)
class ResetResult:
    group_id: str
    state: str
    executed: bool
    changes: list[OffsetChange]
    warnings: list[str] = field(default_factory=list)
    group_type: str = ""
    """"share" for a share group (executed with AlterShareGroupOffsets), else ""."""


class GroupActiveError(AdminError):
    """An offsets reset asked for a group that has members."""


def parse_topic_scope(text: str) -> TopicScope:
    """`orders` or `orders:0,1,2`, as Kafka's `--topic`; ValueError for anything else."""
    topic, sep, partitions = text.partition(":")
    if not topic:
        raise ValueError(f"invalid topic {text!r}: expected TOPIC or TOPIC:PARTITION[,PARTITION...]")
    if not sep:
        return TopicScope(topic)
    numbers = []
    for item in partitions.split(","):
        if not item.strip().isdigit():
            raise ValueError(f"invalid partition {item!r} in {text!r}: expected TOPIC:PARTITION[,PARTITION...]")
        numbers.append(int(item))
    return TopicScope(topic, tuple(sorted(set(numbers))))


async def plan_reset(client: AdminClient, group_id: str, scope: Scope, selector: Selector) -> ResetResult:
    shared = await share.describe_share_group(client, group_id)
    if shared is not None:
        return await _plan_share_reset(client, group_id, shared.state, scope, selector)
    state = await group_state(client, group_id)
    if state not in INACTIVE_STATES:
        raise GroupActiveError(
            f"Assignments can only be reset if the group {group_id!r} is inactive, "
            f"but the current state is {state}."
        )
    connection = await client.coordinator(group_id)
    committed = {key: offset for key, (offset, _) in (await committed_offsets(connection, group_id)).items()}
    partitions = sorted(committed) if scope.all_topics else await _scoped_partitions(client, scope.topics)
    result = ResetResult(group_id, state, False, [])
    for (topic, partition), new in (await _new_offsets(client, partitions, committed, selector, result)).items():
        result.changes.append(OffsetChange(topic, partition, committed.get((topic, partition)), new))
    return result


async def _plan_share_reset(client: AdminClient, group_id: str, state: str, scope: Scope,
                            selector: Selector) -> ResetResult:
    if state != "Empty":
        raise GroupActiveError(
            f"Share group {group_id!r} offsets can only be reset if the group is inactive (Empty), "
            f"but the current state is {state}."
        )
    if selector.kind == "shift":
        raise AdminError("--shift-by is not an option for share groups (kafka-share-groups.sh has none): "
                         "use --to-offset, --to-earliest, --to-latest, --to-current or --to-datetime")
    current = await share.start_offsets(client, group_id)
    partitions = sorted(current) if scope.all_topics else await _scoped_partitions(client, scope.topics)
    result = ResetResult(group_id, state, False, [], group_type="share")
    for (topic, partition), new in (await _new_offsets(client, partitions, current, selector, result)).items():
        result.changes.append(OffsetChange(topic, partition, current.get((topic, partition)), new))
    return result


async def execute_plan(client: AdminClient, plan: ResetResult) -> None:
    if plan.changes and plan.group_type == "share":
        await share.alter_offsets(client, plan.group_id, ((c.topic, c.partition, c.new_offset) for c in plan.changes))
    elif plan.changes:
        await _commit(await client.coordinator(plan.group_id), plan.group_id, plan.changes)
    plan.executed = True


async def _scoped_partitions(client: AdminClient, topics: tuple[TopicScope, ...]) -> list[tuple[str, int]]:
    names = sorted({t.topic for t in topics})
    metadata = await client.metadata(names)
    missing = [t for t in names if t not in metadata.partitions]
    if missing:
        errors = ", ".join(f"{t} ({error_name(metadata.topic_errors[t])})" if t in metadata.topic_errors else t
                           for t in missing)
        raise AdminError(f"unknown topic(s): {errors}")
    wanted: set[tuple[str, int]] = set()
    for scope in topics:
        known = [p.partition for p in metadata.partitions[scope.topic]]
        wanted.update((scope.topic, p) for p in (known if scope.partitions is None else scope.partitions))
    absent = [f"{t}-{p}" for t, p in sorted(wanted) if p not in {i.partition for i in metadata.partitions[t]}]
    if absent:
        raise AdminError(f"The partitions \"{','.join(absent)}\" do not exist")
    leaderless = [f"{i.topic}-{i.partition}" for t in names for i in metadata.partitions[t]
                  if (t, i.partition) in wanted and (i.leader_id < 0 or i.leader_id not in metadata.brokers)]
    if leaderless:
        raise AdminError(f"The partitions \"{','.join(leaderless)}\" have no leader")
    return sorted(wanted)


async def _new_offsets(client: AdminClient, partitions: list[tuple[str, int]], committed: dict[tuple[str, int], int],
                       selector: Selector, result: ResetResult) -> dict[tuple[str, int], int]:
    if not partitions:
        return {}
    kind, value = selector.kind, selector.value
    if kind == "earliest":
        return _known(await list_log_offsets(client, partitions, EARLIEST), "earliest")
    if kind == "latest":
        return _known(await list_log_offsets(client, partitions, LATEST), "latest")
    if kind == "current":
        without = [key for key in partitions if key not in committed]
        latest = _known(await list_log_offsets(client, without, LATEST), "latest")
        return {key: committed[key] if key in committed else latest[key] for key in partitions}
    if kind == "timestamp":
        assert value is not None
        found = _known(await list_log_offsets(client, partitions, value), "at the timestamp")
        after = [key for key in partitions if found[key] == NO_OFFSET]
        latest = _known(await list_log_offsets(client, after, LATEST), "latest")
        for topic, partition in after:
            found[(topic, partition)] = latest[(topic, partition)]
            result.warnings.append(f"partition {topic}-{partition} has no record at or after {_iso(value)}: "
                                   f"falling back to its latest offset {latest[(topic, partition)]}")
        return found
    assert value is not None
    if kind == "shift":
        unshiftable = [f"{t}-{p}" for t, p in partitions if (t, p) not in committed]
        if unshiftable:
            raise AdminError(f"Cannot shift offset for partition(s) {', '.join(unshiftable)} "
                             "since there is no current committed offset")
        wanted = {key: committed[key] + value for key in partitions}
    else:
        wanted = dict.fromkeys(partitions, value)
    earliest = _known(await list_log_offsets(client, partitions, EARLIEST), "earliest")
    latest = _known(await list_log_offsets(client, partitions, LATEST), "latest")
    return {key: min(max(offset, earliest[key]), latest[key]) for key, offset in wanted.items()}


def _iso(timestamp_ms: int) -> str:
    return datetime.fromtimestamp(timestamp_ms / 1000, UTC).isoformat(timespec="milliseconds")


def _known(found: dict[tuple[str, int], LogOffset], what: str) -> dict[tuple[str, int], int]:
    failed = [f"{t}-{p} ({o.error})" for (t, p), o in sorted(found.items()) if o.error is not None]
    if failed:
        raise AdminError(f"cannot read the {what} offset of {', '.join(failed)}")
    return {key: o.offset for key, o in found.items()}


async def _commit(connection: Connection, group_id: str, changes: list[OffsetChange]) -> None:
    by_topic: dict[str, list[OffsetChange]] = defaultdict(list)
    for change in changes:
        by_topic[change.topic].append(change)
    response = await connection.request(OFFSET_COMMIT, {
        "group_id": group_id, "generation_id_or_member_epoch": -1, "generation_id": -1, "member_id": "",
        "group_instance_id": None, "retention_time": -1,
        "topics": [{"name": topic, "partitions": [
            {"partition_index": c.partition, "committed_offset": c.new_offset, "committed_leader_epoch": -1,
             "committed_metadata": "", "commit_timestamp": -1} for c in items]}
            for topic, items in sorted(by_topic.items())],
    })
    errors: dict[tuple[str, int], str] = {}
    for topic in response.topics:
        for p in topic.partitions:
            if int(p.error_code):
                errors[(topic.name, int(p.partition_index))] = error_name(int(p.error_code))
    for change in changes:
        change.error = errors.get((change.topic, change.partition))
    if errors:
        first = next(iter(errors.values()))
        raise AdminError(f"OffsetCommit for group {group_id!r} failed for {len(errors)} partition(s): {first}")
