"""`--to-datetime` and `--by-duration` values read as Kafka reads them: the date-time forms of
`Utils.getDateTime` (milliseconds required, zone optional and UTC when absent) and the grammar of
Java's `Duration.parse` (the examples of its documentation)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator.admin.timespecs import parse_datetime, parse_duration_ns, timestamp_before

SECOND = 10**9
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
DAY = 24 * HOUR


def epoch_ms(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp() * 1000)


@pytest.mark.parametrize(("text", "expected"), [
    # The five forms Kafka documents for Utils.getDateTime.
    ("2020-11-10T16:51:38.198", "2020-11-10T16:51:38.198+00:00"),
    ("2020-11-10T16:51:38.198+0800", "2020-11-10T16:51:38.198+08:00"),
    ("2020-11-10T16:51:38.198+08", "2020-11-10T16:51:38.198+08:00"),
    ("2020-11-10T16:51:38.198+08:00", "2020-11-10T16:51:38.198+08:00"),
    ("2020-11-10T16:51:38.198Z", "2020-11-10T16:51:38.198+00:00"),
    ("2020-11-10T16:51:38.198-05:30", "2020-11-10T16:51:38.198-05:30"),
    ("1969-12-31T23:59:59.999Z", "1969-12-31T23:59:59.999+00:00"),
])
def test_kafkas_date_time_forms(text: str, expected: str) -> None:
    assert parse_datetime(text) == epoch_ms(expected)


@pytest.mark.parametrize("text", [
    "2020-11-10T16:51:38",  # no milliseconds: Kafka's strict pattern refuses it
    "2020-11-10 16:51:38.198",
    "2020-11-10",
    "2020-02-30T00:00:00.000",
    "2020-11-10T24:00:00.000",
    "2020-11-10T16:51:38.198+24:00",
    "2020-11-10T16:51:38.198+08:60",
    "2020-11-10T16:51:38.1984",
    "yesterday",
])
def test_anything_else_is_refused_naming_the_format(text: str) -> None:
    with pytest.raises(ValueError, match=r"YYYY-MM-DDTHH:mm:SS\.sss|not a valid date-time|impossible zone"):
        parse_datetime(text)


@given(st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(9998, 12, 31),
                    timezones=st.just(UTC)), st.integers(-23 * 60, 23 * 60))
def test_every_instant_round_trips_in_any_zone(moment: datetime, zone_minutes: int) -> None:
    moment = moment.replace(microsecond=moment.microsecond // 1000 * 1000)
    local = moment.astimezone(timezone(timedelta(minutes=zone_minutes)))
    # Exact integer milliseconds: float `timestamp() * 1000` rounds the wrong way for some instants.
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    assert parse_datetime(local.isoformat(timespec="milliseconds")) == (moment - epoch) // timedelta(milliseconds=1)


@pytest.mark.parametrize(("text", "nanos"), [
    # The examples of java.time.Duration.parse's documentation.
    ("PT20.345S", 20 * SECOND + 345_000_000),
    ("PT15M", 15 * MINUTE),
    ("PT10H", 10 * HOUR),
    ("P2D", 2 * DAY),
    ("P2DT3H4M", 2 * DAY + 3 * HOUR + 4 * MINUTE),
    ("PT-6H3M", -6 * HOUR + 3 * MINUTE),
    ("-PT6H3M", -6 * HOUR - 3 * MINUTE),
    ("-PT-6H+3M", 6 * HOUR - 3 * MINUTE),
    # Case, comma fractions, signed fractional seconds.
    ("p1dt1h", DAY + HOUR),
    ("PT1,5S", SECOND + 500_000_000),
    ("PT-0.5S", -500_000_000),
    ("PT0.000000001S", 1),
])
def test_java_duration_grammar(text: str, nanos: int) -> None:
    assert parse_duration_ns(text) == nanos


@pytest.mark.parametrize("text", ["P", "PT", "P1DT", "1D", "P1H", "PT1D", "P1W", "PT1.5M", "PT0.0000000001S", ""])
def test_durations_java_refuses_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="PnDTnHnMnS"):
        parse_duration_ns(text)


def test_by_duration_counts_back_from_now_in_whole_milliseconds() -> None:
    now_ns = 1_700_000_000_123_456_789
    assert timestamp_before(now_ns, parse_duration_ns("PT1H")) == 1_700_000_000_123 - 3_600_000
    assert timestamp_before(now_ns, parse_duration_ns("PT0.000456790S")) == 1_700_000_000_122  # floor, as Java
