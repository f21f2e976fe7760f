"""ListOffsets, routed to each partition's leader, with every partition's outcome kept.

`list_log_offsets` asks, for each (topic, partition), the offset at one timestamp: LATEST (-1, the log
end), EARLIEST (-2, the log start) or a time in epoch milliseconds (the first offset whose record
timestamp is at or after it; -1 when there is none, as Kafka answers). Partitions are grouped by the
leader named in Metadata and each leader is asked once. Each partition comes back as a `LogOffset`:
its offset, or the reason there is none (no leader, or the broker's error code by name), so callers
decide whether a missing answer is an error (offsets reset) or a "-" in a table (describe).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from .client import LIST_OFFSETS, AdminClient, error_name

LATEST = -1
EARLIEST = -2
NO_OFFSET = -1


@dataclass(frozen=True, slots=True)
class LogOffset:
    offset: int
    """The offset found; NO_OFFSET (-1) when a timestamp lies after every record."""
    error: str | None = None
    """Why there is no answer (the offset is then meaningless): "NO_LEADER" or a Kafka error name."""


async def list_log_offsets(client: AdminClient, partitions: Iterable[tuple[str, int]],
                           timestamp: int) -> dict[tuple[str, int], LogOffset]:
    """(topic, partition) → its offset at `timestamp`, or the error that kept it from being known."""
    wanted = sorted(set(partitions))
    if not wanted:
        return {}
    metadata = await client.metadata(sorted({t for t, _ in wanted}))
    result: dict[tuple[str, int], LogOffset] = {}
    by_leader: dict[int, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for topic, partition in wanted:
        info = next((p for p in metadata.partitions.get(topic, []) if p.partition == partition), None)
        if info is not None and info.leader_id >= 0 and info.leader_id in metadata.brokers:
            by_leader[info.leader_id][topic].append(partition)
        else:
            result[(topic, partition)] = LogOffset(NO_OFFSET, "NO_LEADER")
    for leader_id, topics in sorted(by_leader.items()):
        connection = await client.broker(metadata.brokers[leader_id])
        response = await connection.request(LIST_OFFSETS, {
            "replica_id": -1, "isolation_level": 0, "timeout": 30000,
            "topics": [{"name": topic, "partitions": [
                {"partition_index": p, "current_leader_epoch": -1, "timestamp": timestamp, "max_num_offsets": 1}
                for p in parts]} for topic, parts in sorted(topics.items())],
        })
        for topic in response.topics:
            for p in topic.partitions:
                code = int(p.error_code)
                result[(topic.name, int(p.partition_index))] = LogOffset(
                    int(p.offset) if code == 0 else NO_OFFSET, error_name(code) if code else None)
    for key in wanted:
        result.setdefault(key, LogOffset(NO_OFFSET, "NOT_ANSWERED"))
    return result
