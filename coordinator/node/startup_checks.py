"""The start-up checks that know features: the data directory is laid out for this shard count
(`check_layout`); sidecar mode over several shards has valid node ids and SO_REUSEPORT
(`check_sidecar_shards`). They raise the runtime's `StartupError`, the one line the operator reads.
"""

from __future__ import annotations

import socket
from pathlib import Path

from ..runtime.startup_checks import StartupError
from ..shards.placement import LayoutError, ShardLayout, check_partitions, read_layout
from ..sidecar.settings import SidecarConfig

INT32_MAX = 2**31 - 1


def check_layout(root: Path, layout: ShardLayout) -> None:
    """The data directory at `root` is laid out (or, never laid out, fits) for `layout`."""
    try:
        recorded = read_layout(root)
        check_partitions(recorded, layout.partitions)
    except LayoutError as exc:
        raise StartupError(str(exc)) from exc
    if (recorded or ShardLayout(layout.partitions)) != layout:
        raise StartupError(f"{root} is laid out for {(recorded or ShardLayout()).shards} shard(s), not "
                           f"{layout.shards}: start it with `coordinator serve`, which moves the partitions")


def check_sidecar_shards(sidecar: SidecarConfig, shards: int) -> None:
    """Sidecar mode over several shards: the shards' node ids must be Kafka node ids (int32), and
    the shards share the broker listeners' ports, which needs SO_REUSEPORT."""
    last = sidecar.sidecar_node_id + shards - 1
    if last > INT32_MAX:
        raise StartupError(f"sidecar.node.id {sidecar.sidecar_node_id} + coordinator.shards {shards} - 1 = {last} "
                           f"is not a Kafka node id (at most {INT32_MAX})")
    if not hasattr(socket, "SO_REUSEPORT"):
        raise StartupError("coordinator.shards above 1 in sidecar mode needs SO_REUSEPORT, which this platform "
                           "does not have")
