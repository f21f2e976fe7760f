"""What must hold before a coordinator process serves, and the one error that stops start-up.

`StartupError` carries the one line the operator reads (the command line prints it and exits with
code 2, never a traceback). The checks here raise it: the data directory is a directory this
process can write (`prepare_data_dir`); it is laid out for this shard count (`check_layout`); the
log directory a standby tailed is still the one it owns once it takes over (`check_log_dir_kept`);
sidecar mode over several shards has valid node ids and SO_REUSEPORT (`check_sidecar_shards`).
`reason` turns a failed bind or file operation into its short reason for that line.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

from ..shards.placement import LayoutError, ShardLayout, check_partitions, read_layout
from ..sidecar.settings import SidecarConfig

INT32_MAX = 2**31 - 1


class StartupError(Exception):
    """The server cannot start as configured; the message is the one line the operator reads."""


def prepare_data_dir(path: Path) -> None:
    """`log.dirs` must be a directory this process can create files in."""
    if path.exists() and not path.is_dir():
        raise StartupError(f"log.dirs {path}: not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StartupError(f"log.dirs {path}: cannot create the directory: {reason(exc)}") from exc
    probe = path / f".write-test-{os.getpid()}"
    try:
        probe.touch()
        probe.unlink()
    except OSError as exc:
        raise StartupError(f"log.dirs {path}: not writable: {reason(exc)}") from exc


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


def directory_identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of a directory, None while it does not exist."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    return stat.st_dev, stat.st_ino


def check_log_dir_kept(log_dir: Path, before: tuple[int, int] | None) -> None:
    """`log_dir` is still the directory whose `directory_identity` was `before` (None: it did not
    exist then, nothing was read from it)."""
    if before is not None and directory_identity(log_dir) != before:
        raise StartupError(f"{log_dir} was replaced by a move of the partitions while this process "
                           f"waited as a standby, so what it read is stale: start it again")


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


def reason(exc: OSError) -> str:
    """The short reason of a failed bind or file operation ("Address already in use")."""
    if isinstance(exc, socket.gaierror) or not exc.errno:
        return str(exc.strerror or exc)
    return os.strerror(exc.errno)
