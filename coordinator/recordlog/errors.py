"""Exceptions raised by the record log.

Everything the package raises on purpose derives from `RecordLogError`, so a caller (and the
"random bytes never raise anything else" property test) can tell our signalling apart from bugs.
"""

from __future__ import annotations


class RecordLogError(Exception):
    """Base class of every error the record log raises on purpose."""


class CorruptEntry(RecordLogError):
    """One framed entry fails its checks (CRC, lengths, structure).

    Readers never let this escape: they stop at the entry and report the valid length instead.
    It is public for `decode_entry`, which decodes exactly one frame.
    """


class UnsupportedFormatVersion(RecordLogError):
    """An entry has a valid CRC but a format version this code does not know.

    It was written by a newer coordinator. Readers raise this instead of treating the entry as a
    torn tail, because truncating a newer log would destroy acknowledged data.
    """

    def __init__(self, version: int, position: int | None = None) -> None:
        where = "" if position is None else f" at byte {position}"
        super().__init__(f"entry format version {version}{where} is not supported")
        self.version = version
        self.position = position


class CorruptLog(RecordLogError):
    """Damage that recovery must not repair silently.

    Only the tail of the last segment can be torn by a crash (closed segments are fsynced before
    the next one is created), so a closed segment that ends in a bad entry means lost
    acknowledged data; we refuse to start rather than serve a state with a hole in it.
    """


class FencedWriter(RecordLogError):
    """Another writer has appended to the log since this writer last wrote.

    The writer is fail-stop after this: every later call raises `LogFailed`.
    """


class WriteRefused(RecordLogError):
    """A write failed (a full disk: ENOSPC, EDQUOT) and was undone: the file was cut back to
    where it was, so nothing of the refused data remains and the writer can go on.

    Only a failed *write* is refused this way. A failed fsync stays fail-stop (`LogFailed`):
    after it the kernel may have dropped the dirty pages it could not write, so what the file
    holds is unknown and retrying the fsync would report success over lost data (fsyncgate).
    `__cause__` is the OSError."""

    def __init__(self, message: str, first_offset: int) -> None:
        super().__init__(message)
        self.first_offset = first_offset
        """The first offset that was not written: it and everything appended after it are gone."""


class LogRewound(RecordLogError):
    """A reader following the log finds that entries it already returned were cut off by the writer
    (a refused write: `WriteRefused`). What it built from them must be rebuilt from the start."""


class LogFailed(RecordLogError):
    """The writer is unusable because an earlier write, fsync or fence check failed.

    Fail-stop: we never undo in-memory state; the process exits and a restart replays the log.
    """
