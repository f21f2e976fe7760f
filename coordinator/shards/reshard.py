"""Bringing a data directory to the configured shard layout before any shard starts.

`ensure_layout(root, layout)` runs in `coordinator serve` before the shard processes (or the one
process) start. A directory with no layout is a one-shard layout (the single-process layout of
earlier versions). When the configured number of shards differs from the recorded one, whole
partitions move between shard logs; a group never moves off its partition.
"""

from __future__ import annotations

from pathlib import Path

from ..recordlog import RealFileSystem
from ..recordlog.segments import list_segments
from .placement import (
    LayoutError,
    ShardLayout,
    check_partitions,
    read_layout,
    shard_data_dir,
    write_layout,
)


def ensure_layout(root: Path, layout: ShardLayout) -> None:
    """Leave `root` laid out as `layout`, or raise `LayoutError` (one line) if it cannot be."""
    if root.exists() and not root.is_dir():
        if layout.shards == 1:
            return  # the server's own data-directory check says so
        raise LayoutError(f"log.dirs {root}: not a directory")
    recorded = read_layout(root)
    check_partitions(recorded, layout.partitions)
    current = recorded or ShardLayout(layout.partitions, 1)
    if current == layout:
        return
    fs = RealFileSystem()
    holding = [k for k in range(current.shards)
               if (shard_data_dir(root, k) / "log").is_dir() and list_segments(fs, str(shard_data_dir(root, k) / "log"))]
    if holding:
        raise LayoutError(f"{root} holds groups laid out for {current.shards} shard(s); moving them to "
                          f"{layout.shards} is not served yet")
    root.mkdir(parents=True, exist_ok=True)
    write_layout(root, layout)
