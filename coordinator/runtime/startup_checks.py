"""What must hold before a coordinator process serves, and the one error that stops start-up.

`StartupError` carries the one line the operator reads (the command line prints it and exits with
code 2, never a traceback). The checks here raise it and know no feature: the data directory is a
directory this process can write (`prepare_data_dir`); the log directory a standby tailed is still
the one it owns once it takes over (`check_log_dir_kept`). `reason` turns a failed bind or file
operation into its short reason for that line. The checks that know the shards' layout and the
sidecar are the node's (`node/startup_checks.py`).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path


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


def reason(exc: OSError) -> str:
    """The short reason of a failed bind or file operation ("Address already in use")."""
    if isinstance(exc, socket.gaierror) or not exc.errno:
        return str(exc.strerror or exc)
    return os.strerror(exc.errno)
