"""Where a group lives: group id -> log partition -> shard process -> node.

Kafka places a group on the `__consumer_offsets` partition `abs(groupId.hashCode()) % partitions`
and the partition on a broker. We do the same over processes on one machine:

- a group's **partition** is Kafka's formula with Java's `String.hashCode`, so a group sits on the
  partition number Kafka would give it. It depends only on `offsets.topic.num.partitions`, which is
  fixed once a data directory has a layout: changing it would rehash every group, so it is refused.
- a partition's **shard** is `partition % shards` (`coordinator.shards`). Changing the number of
  shards moves whole partitions between shard logs (`coordinator/shards/reshard.py`); it never
  moves a group off its partition.
- shard `k` is node `node.id + k`, listening on each configured listener's port `+ k`. Every
  shard derives every node's address from the configuration alone, so FindCoordinator and
  Metadata need no exchange between processes.

The data directory: shard 0 keeps the single-process layout at the root (`log/`,
`coordinator.lock`, `topics.json`, `partitions/`), so a directory written before shards existed is
shard 0 of a one-shard layout as it is. Shard `k >= 1` has `shards/<k>/` (its own `log/` and lock).
`shards.json` at the root records the layout; a directory without it is a one-shard layout.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

LAYOUT_FILE = "shards.json"
INTENT_FILE = "reshard.json"
"""Present while a move between layouts is being switched (`reshard.py`): no shard may start."""
DEFAULT_PARTITIONS = 50
"""Kafka's `offsets.topic.num.partitions` default: the same partition numbers as Kafka, and
enough partitions to spread evenly over any shard count a single machine has cores for."""


class LayoutError(Exception):
    """The data directory's layout cannot serve the configuration; the message is one line."""


def java_string_hash(value: str) -> int:
    """Java's `String.hashCode()`: 31-polynomial over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = value.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, partitions: int) -> int:
    """Kafka's `Utils.abs(groupId.hashCode()) % partitions` (`Utils.abs(MIN_VALUE)` is 0)."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


@dataclass(frozen=True, slots=True)
class ShardLayout:
    """The fixed partition count and the number of shard processes serving them."""

    partitions: int = DEFAULT_PARTITIONS
    shards: int = 1

    def __post_init__(self) -> None:
        if self.partitions < 1:
            raise LayoutError(f"offsets.topic.num.partitions must be at least 1, not {self.partitions}")
        if not 1 <= self.shards <= self.partitions:
            raise LayoutError(f"coordinator.shards must be between 1 and offsets.topic.num.partitions "
                              f"({self.partitions}), not {self.shards}")

    def shard_of_partition(self, partition: int) -> int:
        return partition % self.shards

    def shard_of_group(self, group_id: str) -> int:
        return self.shard_of_partition(partition_for(group_id, self.partitions))

    def partitions_of(self, shard: int) -> tuple[int, ...]:
        return tuple(p for p in range(self.partitions) if p % self.shards == shard)


def shard_data_dir(root: Path, shard: int) -> Path:
    """Shard 0 is the root (the single-process layout); shard k >= 1 is `shards/<k>`."""
    return root if shard == 0 else root / "shards" / str(shard)


def read_layout(root: Path) -> ShardLayout | None:
    """The layout recorded in `root`, or None for a directory that has none (one shard).

    Refused while a move between layouts is unfinished: `coordinator serve` completes it first."""
    if (root / INTENT_FILE).exists():
        raise LayoutError(f"{root} is between shard layouts (a move was interrupted): start it with "
                          f"`coordinator serve`, which completes the move")
    try:
        raw = json.loads((root / LAYOUT_FILE).read_text())
        return ShardLayout(partitions=int(raw["partitions"]), shards=int(raw["shards"]))
    except (FileNotFoundError, NotADirectoryError):
        return None  # no layout yet (the server's own checks report a bad data directory)
    except (ValueError, KeyError, TypeError) as exc:
        raise LayoutError(f"{root / LAYOUT_FILE} is not a shard layout ({exc})") from exc


def write_layout(root: Path, layout: ShardLayout) -> None:
    """Record `layout` atomically: a temporary file, fsynced, renamed over the old one."""
    tmp = root / (LAYOUT_FILE + ".tmp")
    with open(tmp, "w") as out:
        json.dump({"version": 1, "partitions": layout.partitions, "shards": layout.shards}, out)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, root / LAYOUT_FILE)
    fd = os.open(root, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def check_partitions(recorded: ShardLayout | None, configured_partitions: int) -> None:
    """A data directory's partition count never changes (it would rehash every group)."""
    if recorded is not None and recorded.partitions != configured_partitions:
        raise LayoutError(
            f"offsets.topic.num.partitions is {configured_partitions} but the data directory was "
            f"laid out with {recorded.partitions}; it cannot change (every group would move)")
