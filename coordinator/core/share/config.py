"""A share group's effective settings as the share core reads them, and ``share.auto.offset.reset``.

:class:`ShareConfig` holds the values one operation needs (the group's dynamic config over the
broker-wide defaults, Kafka's ``GroupConfig`` over ``ShareGroupConfig``); the defaults are Kafka
4.3's. The broker-wide values are ``GroupConfig``'s ``group.share.*`` fields
(``core/config.py``; the registration builds a :class:`ShareConfig` from them): this module only validates a value the way Kafka does, so a bad one is refused with
Kafka's bounds in one line.

:class:`AutoOffsetReset` is ``share.auto.offset.reset``: ``latest`` (Kafka's default), ``earliest``
or ``by_duration:<ISO-8601 duration>``. It decides where a share partition starts the first time it
is initialized (and after its offsets were deleted); it is never consulted again after that.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

DEFAULT_LOCK_DURATION_MS = 30_000  # group.share.record.lock.duration.ms
DEFAULT_DELIVERY_COUNT_LIMIT = 5  # group.share.delivery.count.limit
DEFAULT_MAX_RECORD_LOCKS = 2_000  # group.share.partition.max.record.locks


@dataclass(frozen=True, slots=True)
class ShareConfig:
    """The settings a share partition operation reads (Kafka reads them on every use, so a change
    applies to the next acquisition, release or lock; locks already taken keep their deadline)."""

    lock_duration_ms: int = DEFAULT_LOCK_DURATION_MS
    delivery_count_limit: int = DEFAULT_DELIVERY_COUNT_LIMIT
    max_in_flight_records: int = DEFAULT_MAX_RECORD_LOCKS
    renew_enabled: bool = True  # share.renew.acknowledge.enable (4.3)

    def __post_init__(self) -> None:
        # Kafka's broker-wide bounds (ShareGroupConfig): values outside them never reach a partition.
        if not 1_000 <= self.lock_duration_ms <= 3_600_000:
            raise ValueError(f"share.record.lock.duration.ms must be in [1000, 3600000], got {self.lock_duration_ms}")
        if not 2 <= self.delivery_count_limit <= 25:
            raise ValueError(f"share.delivery.count.limit must be in [2, 25], got {self.delivery_count_limit}")
        if not 1 <= self.max_in_flight_records <= 10_000:
            raise ValueError(
                f"share.partition.max.record.locks must be in [1, 10000], got {self.max_in_flight_records}"
            )


class ResetStrategy(enum.Enum):
    EARLIEST = "earliest"
    LATEST = "latest"
    BY_DURATION = "by_duration"


# ISO-8601 durations as Java's Duration.parse reads them: days, hours, minutes, (fractional) seconds.
_DURATION = re.compile(
    r"P(?:(?P<d>\d+)D)?(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+(?:\.\d{1,9})?)S)?)?", re.IGNORECASE
)


@dataclass(frozen=True, slots=True)
class AutoOffsetReset:
    """A parsed ``share.auto.offset.reset``."""

    strategy: ResetStrategy
    duration_ms: int = 0  # by_duration only

    @classmethod
    def parse(cls, text: str) -> AutoOffsetReset:
        """Kafka's ``ShareGroupAutoOffsetResetStrategy.fromString``; ValueError names what is wrong."""
        lowered = text.strip().lower()
        if lowered in ("earliest", "latest"):
            return cls(ResetStrategy(lowered))
        prefix = "by_duration:"
        if lowered.startswith(prefix):
            spec = text.strip()[len(prefix):]
            match = _DURATION.fullmatch(spec)
            if match is None or spec.upper() in ("P", "PT") or spec.upper().endswith("T"):
                raise ValueError(f"share.auto.offset.reset: {spec!r} is not an ISO-8601 duration (PnDTnHnMn.nS)")
            days, hours, minutes = (int(match.group(g) or 0) for g in ("d", "h", "m"))
            seconds = float(match.group("s") or 0)
            millis = ((days * 24 + hours) * 60 + minutes) * 60_000 + round(seconds * 1000)
            return cls(ResetStrategy.BY_DURATION, millis)
        raise ValueError(
            f"share.auto.offset.reset must be earliest, latest or by_duration:<ISO-8601 duration>, got {text!r}"
        )

    def lookup_timestamp(self, now_ms: int) -> int | None:
        """For by_duration, the timestamp whose offset (ListOffsets by time) starts the partition."""
        return now_ms - self.duration_ms if self.strategy is ResetStrategy.BY_DURATION else None

    def start_offset(self, earliest: int, latest: int, offset_for_timestamp: int | None = None) -> int:
        """Where a newly initialized share partition starts. ``latest`` is the read_uncommitted end of
        the log (Kafka's LATEST); by_duration takes ``offset_for_timestamp``, the first offset at or
        after :meth:`lookup_timestamp` (None or -1 when no record is that recent: the log end)."""
        if self.strategy is ResetStrategy.EARLIEST:
            return earliest
        if self.strategy is ResetStrategy.LATEST:
            return latest
        if offset_for_timestamp is None or offset_for_timestamp < 0:
            return latest
        return max(earliest, offset_for_timestamp)
