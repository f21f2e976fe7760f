"""The accumulator one core operation writes its effects into, and the shard's timer table.

Handlers never return effects piecemeal; they call ``fx.record(...)``, ``fx.reply(...)``,
``fx.schedule(...)``, ``fx.event(...)`` on the single :class:`Effects` of the operation, and the shard
turns it into one :class:`~coordinator.core.result.Result` (= one log entry).
"""

from __future__ import annotations

from coordinator.core.record_codec import Record
from coordinator.core.result import Reply, Result, TimerOp

TimerKey = tuple[str, ...]

# Timer key constructors. The first element names the timer kind; the shard dispatches on it.
OFFSETS_EXPIRATION_KEY: TimerKey = ("offsets-expiration",)


def classic_heartbeat_key(group_id: str, member_id: str) -> TimerKey:
    return ("classic-heartbeat", group_id, member_id)


def classic_join_key(group_id: str) -> TimerKey:
    return ("classic-join", group_id)


def classic_sync_key(group_id: str) -> TimerKey:
    return ("classic-sync", group_id)


class TimerTable:
    """Soft state: the deadline currently armed for each timer key (what the runtime was told)."""

    __slots__ = ("deadlines",)

    def __init__(self) -> None:
        self.deadlines: dict[TimerKey, int] = {}

    def is_current(self, key: TimerKey, deadline_ms: int) -> bool:
        return self.deadlines.get(key) == deadline_ms


class Effects:
    __slots__ = ("events", "now_ms", "records", "replies", "timer_ops", "timers")

    def __init__(self, now_ms: int, timers: TimerTable) -> None:
        self.now_ms = now_ms
        self.timers = timers
        self.records: list[Record] = []
        self.replies: list[Reply] = []
        self.timer_ops: list[TimerOp] = []
        self.events: list[object] = []

    def record(self, record: Record) -> None:
        self.records.append(record)

    def reply(self, ref: int, response: object) -> None:
        self.replies.append(Reply(ref, response))

    def event(self, event: object) -> None:
        self.events.append(event)

    def schedule(self, key: TimerKey, delay_ms: int) -> None:
        """Arm (or re-arm) ``key`` to fire ``delay_ms`` from now."""
        deadline = self.now_ms + (delay_ms if delay_ms > 0 else 0)  # not max(): a call per heartbeat
        self.timers.deadlines[key] = deadline
        self.timer_ops.append(TimerOp(key, deadline))

    def cancel(self, key: TimerKey) -> None:
        if self.timers.deadlines.pop(key, None) is not None:
            self.timer_ops.append(TimerOp(key, None))

    def to_result(self) -> Result:
        return Result(self.records, self.replies, self.timer_ops, self.events)
