"""What a core operation returns: effects as data.

The runtime appends ``records`` to the log as ONE entry, and only once that entry is durable does it
release ``replies`` (in order) and apply ``timers``. ``events`` are facts for metrics and the rebalance
history stream; they carry no obligation.

Timers: ``TimerOp(key, deadline_ms)`` arms (or re-arms, replacing) the single timer named ``key`` to
fire at ``deadline_ms`` (absolute, same clock as ``now_ms``); ``deadline_ms=None`` cancels it. When a
timer is due the runtime posts ``TimerFired(key, deadline_ms)`` to the shard. The shard ignores a fired
timer whose deadline is no longer the current one for that key, so a late or duplicate firing is harmless.
"""

from __future__ import annotations

import msgspec

from coordinator.core.record_codec import Record


class Reply(msgspec.Struct, frozen=True, gc=False):
    """The response to the in-flight request ``ref`` (the opaque id the adapter put on the request)."""

    ref: int
    response: object


class TimerOp(msgspec.Struct, frozen=True, gc=False):
    key: tuple[str, ...]
    deadline_ms: int | None


class Result(msgspec.Struct):
    records: list[Record] = msgspec.field(default_factory=list)
    replies: list[Reply] = msgspec.field(default_factory=list)
    timers: list[TimerOp] = msgspec.field(default_factory=list)
    events: list[object] = msgspec.field(default_factory=list)
    failure: Exception | None = None
    """A core bug interrupted this step (``handle_batch``): its own effects are dropped, what it
    carried from earlier steps is kept above; the requests in ``failed`` will get no reply."""
    failed: tuple[int, ...] = ()

    def then(self, later: Result) -> Result:
        """This step's effects followed by ``later``'s, as one log entry."""
        failure = self.failure or later.failure
        return Result(self.records + later.records, self.replies + later.replies, self.timers + later.timers,
                      self.events + later.events, failure, self.failed + later.failed)
