"""`--timeout` bounds the whole admin command: against brokers that accept connections and never
answer, `groups list --timeout 1` ends with exit 1 and one line after about a second, not after a
second per request it tried (ApiVersions v3, then v0, on each bootstrap address)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from coordinator.cli import build_parser, main


@pytest.fixture
def silent_brokers() -> Iterator[str]:
    """Two listening sockets nobody reads from: connections succeed, requests are never answered."""
    with socket.socket() as first, socket.socket() as second:
        for s in (first, second):
            s.bind(("127.0.0.1", 0))
            s.listen()
        yield ",".join(f"127.0.0.1:{s.getsockname()[1]}" for s in (first, second))


def test_the_timeout_bounds_the_whole_command(silent_brokers: str, capsys) -> None:
    build_parser()  # imports the sub-commands' modules now, so the clock below times only the command
    started = time.monotonic()
    code = main(["groups", "list", "--bootstrap", silent_brokers, "--timeout", "1"])
    elapsed = time.monotonic() - started
    err = capsys.readouterr().err
    assert code == 1
    assert elapsed < 1.5, f"took {elapsed:.2f} s with --timeout 1"
    assert err.strip().splitlines() == ["coordinator: error: timed out after 1s (--timeout bounds the whole command)"]
