"""The two time arguments of `offsets reset`, parsed exactly as Kafka's kafka-consumer-groups does.

- `--to-datetime`: `YYYY-MM-DDTHH:mm:SS.sss`, optionally followed by a zone: `Z`, `+hh`, `+hhmm` or
  `+hh:mm` (or `-`). No zone means UTC. Kafka (`Utils.getDateTime`) parses with a strict
  SimpleDateFormat, so the milliseconds are required and impossible dates are refused.
- `--by-duration`: an ISO-8601 duration as Java's `Duration.parse` reads it, `PnDTnHnMnS`: days,
  hours, minutes and seconds (with up to nine fraction digits), each optional but at least one
  present, each optionally signed, the whole optionally signed, letters in either case. The reset
  goes to the first offset whose timestamp is at or after now minus the duration.

Both return epoch milliseconds and raise `ValueError` with a message that names the expected format.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

DATETIME_FORMAT = "YYYY-MM-DDTHH:mm:SS.sss[Z|±hh|±hhmm|±hh:mm]"
DURATION_FORMAT = "PnDTnHnMnS"

_DATETIME = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{3})"
    r"(?:(Z)|([+-])(\d{2})(?::?(\d{2}))?)?"
)
# Java's Duration.parse grammar: [-+]P[nD][T[nH][nM][n[.fraction]S]], case-insensitive.
_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?\d+)D)?"
    r"(T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+)(?:[.,](\d{0,9}))?S)?)?",
    re.IGNORECASE,
)
_NANOS_PER_MS = 1_000_000
_NANOS = {"D": 86_400 * 10**9, "H": 3_600 * 10**9, "M": 60 * 10**9, "S": 10**9}


def parse_datetime(text: str) -> int:
    """Epoch milliseconds of a Kafka `--to-datetime` value."""
    match = _DATETIME.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"{text!r} is not a date-time in the format {DATETIME_FORMAT}")
    year, month, day, hour, minute, second, millis = (int(g) for g in match.groups()[:7])
    zone_z, sign, zone_hours, zone_minutes = match.groups()[7:]
    zone = UTC
    if zone_z is None and sign is not None:
        offset = timedelta(hours=int(zone_hours), minutes=int(zone_minutes or 0))
        if offset >= timedelta(hours=24) or int(zone_minutes or 0) >= 60:
            raise ValueError(f"{text!r} has an impossible zone offset")
        zone = timezone(-offset if sign == "-" else offset)
    try:
        moment = datetime(year, month, day, hour, minute, second, millis * 1000, tzinfo=zone)
    except ValueError as exc:
        raise ValueError(f"{text!r} is not a valid date-time: {exc}") from exc
    return int((moment - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1))


def parse_duration_ns(text: str) -> int:
    """Nanoseconds of an ISO-8601 duration as Java's `Duration.parse` reads it (may be negative)."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"{text!r} is not an ISO-8601 duration in the format {DURATION_FORMAT}")
    negate, days, time_part, hours, minutes, seconds, fraction = match.groups()
    if (days is None and time_part is None) or (time_part is not None and time_part.upper() == "T"):
        raise ValueError(f"{text!r} is not an ISO-8601 duration in the format {DURATION_FORMAT}")
    total = 0
    for amount, unit in ((days, "D"), (hours, "H"), (minutes, "M"), (seconds, "S")):
        if amount is not None:
            total += int(amount) * _NANOS[unit]
    if fraction:
        nanos = int(fraction.ljust(9, "0"))
        total += -nanos if seconds is not None and seconds.startswith("-") else nanos
    return -total if negate == "-" else total


def timestamp_before(now_ns: int, duration_ns: int) -> int:
    """Epoch milliseconds of `now - duration`, rounded down as Java's `Instant.toEpochMilli` does."""
    return (now_ns - duration_ns) // _NANOS_PER_MS
