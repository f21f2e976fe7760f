"""Failed authentications are logged once per client address and interval, with a count: the first
at once, the rest when the interval ends; an address quiet for a whole interval is forgotten."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from coordinator.security.failures import AuthenticationFailures
from tests.support.polling import eventually


def _lines(logs: list[dict]) -> list[tuple[str, int]]:
    return [(e["host"], e["count"]) for e in logs if e["event"] == "authentication_failed"]


@pytest.mark.asyncio
async def test_a_burst_of_failures_is_one_line_at_once_then_one_count_per_interval() -> None:
    failures = AuthenticationFailures(delay_ms=100, interval_s=0.2)
    assert failures.delay == 0.1
    with capture_logs() as logs:
        for _ in range(50):
            failures.failed("10.0.0.7", "SASL_PLAINTEXT", "PLAIN", "Authentication failed: Invalid username or password")
        failures.failed("10.0.0.8", "SASL_SSL", "SCRAM-SHA-512", "Authentication failed: Invalid user credentials")
        assert _lines(logs) == [("10.0.0.7", 1), ("10.0.0.8", 1)]
        await eventually(lambda: ("10.0.0.7", 49) in _lines(logs), timeout=5)
        # Nothing more came: after a quiet interval both addresses are forgotten, with no further line.
        await eventually(lambda: len(failures) == 0, timeout=5)
    assert _lines(logs) == [("10.0.0.7", 1), ("10.0.0.8", 1), ("10.0.0.7", 49)]
    (counted,) = [e for e in logs if e["event"] == "authentication_failed" and e["count"] == 49]
    assert (counted["listener"], counted["mechanism"], counted["interval_s"]) == ("SASL_PLAINTEXT", "PLAIN", 0.2)


@pytest.mark.asyncio
async def test_close_writes_the_counts_not_logged_yet() -> None:
    failures = AuthenticationFailures(delay_ms=0, interval_s=60)
    with capture_logs() as logs:
        for _ in range(3):
            failures.failed("10.0.0.7", "SASL_PLAINTEXT", "PLAIN", "bad")
        failures.close()
    assert _lines(logs) == [("10.0.0.7", 1), ("10.0.0.7", 2)]
    assert len(failures) == 0
