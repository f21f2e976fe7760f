"""Storage failures are logged once per (where, kind) per interval, with the count of those that
were not, and name the errno: a full disk fails every write, and a line per request would bury
everything else."""

from __future__ import annotations

import errno

from structlog.testing import capture_logs

from coordinator.storage_errors import StorageLog, error_kind

FULL = OSError(errno.ENOSPC, "No space left on device")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_one_line_per_kind_per_interval_carrying_how_many_were_not_logged() -> None:
    clock = Clock()
    storage = StorageLog("test", interval_s=10.0, clock=clock)
    with capture_logs() as lines:
        assert storage.failed("write_refused", "produce", FULL, topic="t")
        for _ in range(999):
            assert not storage.failed("write_refused", "produce", FULL, topic="t")
        assert storage.failed("write_refused", "group_log", FULL)  # another place: its own line
        assert storage.failed("write_refused", "produce", OSError(errno.EIO, "I/O error"))  # another kind
        clock.now += 10.0
        assert storage.failed("write_refused", "produce", FULL, topic="t")
    assert [(line["where"], line["kind"], line["suppressed"]) for line in lines] == [
        ("produce", "ENOSPC", 0), ("group_log", "ENOSPC", 0), ("produce", "EIO", 0), ("produce", "ENOSPC", 999)]
    assert all(line["log_level"] == "warning" and "exc_info" not in line for line in lines)
    assert lines[0]["topic"] == "t" and lines[0]["error"] == "[Errno 28] No space left on device"


def test_a_kind_is_the_errno_name_or_the_exception_type() -> None:
    assert error_kind(FULL) == "ENOSPC"
    assert error_kind(OSError(errno.EDQUOT, "quota")) == "EDQUOT"
    assert error_kind(OSError("no errno")) == "OSError"
    assert error_kind(ValueError("x")) == "ValueError"
