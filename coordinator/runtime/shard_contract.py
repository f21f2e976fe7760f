"""The types a shard runtime speaks with the rest of the node (`runtime/shard.py` is the runtime):
what `submit` returns (`Completion`: a future, or an `Answered` born done), the log it writes to
(`LogSink`, and its refusal callback `Refused`), the observers of its events, how a core is rebuilt
from the log (`Reload`), and its queue's unload marker."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable, Generator, Sequence
from typing import Any, Protocol

import msgspec

from protocol.errors import ErrorCode

from ..core.shard import CoordinatorShard

Reload = Callable[[], Awaitable[tuple[CoordinatorShard, Sequence[Any]]]]
"""Builds a core from what the log holds now; returns it with the events to handle first (the
topic snapshot)."""

EncodedRecord = tuple[int, bytes, bytes | None]

Refused = Callable[[int, ErrorCode], None]
"""`on_refused(first_offset, code)`: the entries from `first_offset` on are gone; what waited for
them is answered `code` (NOT_COORDINATOR for a refused write; COORDINATOR_NOT_AVAILABLE when the
log could not be reached, the log upstream)."""


class LogSink(Protocol):
    """Where the shard's entries go: the durable record log. Entries become durable in the order
    they were appended."""

    def append(self, records: Sequence[EncodedRecord], timestamp_ms: int) -> int:
        """Buffer one entry; returns its offset (each entry's is above the one before)."""
        ...

    @property
    def durable_end(self) -> int:
        """Every entry whose offset is below it is durable."""
        ...

    def watch(self, on_durable: Callable[[int], None], on_refused: Refused | None = None) -> None:
        """Call `on_durable(durable_end)` each time entries become durable, and
        `on_refused(first_offset, code)` when the log refused the entries from `first_offset` on
        (they are gone, and their offsets are not used again)."""
        ...

    def durable_point(self) -> asyncio.Future[Any] | None:
        """A future resolved once every entry appended so far is durable (it fails if the log
        does); None when nothing appended is still waiting."""
        ...


Observer = Callable[[object], None]


class Answered(msgspec.Struct, frozen=True, gc=False):
    """A completion that was done before ``submit`` returned: the reply may leave at once.

    It answers like a done ``asyncio.Future`` (``done``, ``cancelled``, ``exception``, ``result``,
    ``add_done_callback``, ``cancel``, ``await``), so a caller need not tell the two apart; the hot
    path reads ``response`` directly. (A Struct: a third of a plain class's construction cost.)"""

    response: Any

    def done(self) -> bool:
        return True

    def cancelled(self) -> bool:
        return False

    def cancel(self, msg: Any = None) -> bool:
        return False  # as a done future: too late to cancel

    def exception(self) -> BaseException | None:
        return None

    def result(self) -> Any:
        return self.response

    def add_done_callback(self, fn: Callable[[Any], object], *, context: contextvars.Context | None = None) -> None:
        asyncio.get_running_loop().call_soon(fn, self, context=context)  # as a done future does

    def __await__(self) -> Generator[Any, None, Any]:
        return self.response
        yield  # pragma: no cover - makes this a generator that finishes at once


Completion = asyncio.Future[Any] | Answered
"""What ``submit`` returns: see the module docstring."""


class Unload:
    """Queue marker: give the shard up (parked requests are answered NOT_COORDINATOR)."""

    def __init__(self, done: asyncio.Future[None]) -> None:
        self.done = done

