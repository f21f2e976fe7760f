"""Writing to stdout as a well-behaved Unix tool does: when the reader goes away (`| head -1`), stop
quietly with the exit status of a process killed by SIGPIPE (141), as `cat` or `grep` do.

Python ignores SIGPIPE, so a write to a closed pipe raises BrokenPipeError, and the interpreter then
also fails flushing stdout at exit with a second message. `to_stdout` catches the first and points
stdout at /dev/null so the final flush is silent (the recipe of Python's `signal` documentation).
Used by the operator commands that print (`log dump`, `groups`, `offsets`).
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable

SIGPIPE_EXIT = 128 + signal.SIGPIPE
"""141: what the shell reports for a process killed by SIGPIPE."""


def to_stdout(write: Callable[[], int]) -> int:
    """Run `write` (which prints to sys.stdout and returns an exit code), pipe-safely."""
    try:
        code = write()
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return SIGPIPE_EXIT
