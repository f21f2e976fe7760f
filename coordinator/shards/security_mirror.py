"""Shard k's read-only copy of shard 0's SCRAM credentials and ACLs: `SecurityMirror`.

Security state (record types 1001 `ScramCredential` and 1002 `Acl`) is written to shard 0's log
only. Every other shard keeps a `SecurityStore` of its own that nothing but this mirror changes:
it follows shard 0's record log with a `LogTailer` (the standby's reader: read-only, it never
touches the directory) and replays the security records into the store, skipping every other
record (shard 0's groups and offsets are none of this shard's business and never reach its core).

Theory of operation:
- `catch_up()` reads whatever shard 0 appended since the last call. The reading (file I/O,
  checksums, splitting entries into records) runs in a worker thread, which only collects the
  security records; they are replayed into the store on the event loop, so the authorizer and SASL
  (which read the store on the loop) never see it half-changed.
- `run()` catches up every `TAIL_INTERVAL_S` for as long as the shard serves: a change made through
  another shard is in force here within one interval (Kafka's brokers likewise apply ACL changes
  asynchronously, when their metadata log reaches the record).
- `wait_for(offset)` catches up until every entry below `offset` has been read: a security write
  forwarded to shard 0 from this shard waits for its entry here before its client is answered, so
  the change is in force on the shard that acknowledged it.
- Start-up: the shard serves nothing that needs the store before the first `catch_up()` (its
  connections hold requests until the store is there, as a broker does until its ACLs are loaded).
  Shard 0's log being absent (never started) is an empty store; a damaged closed segment is logged
  and retried, the copy staying as it was.
- Shard 0 cuts off a write its disk refused (`recordlog.writer`); if this copy had read some of
  it (`LogRewound`), the copy is rebuilt from the start of the log into a new store, swapped in on
  the loop, so no refused change stays in force here.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from ..core.record_codec import replay_encoded_record
from ..logging import get_logger
from ..recordlog import LoadBatch, LogTailer, RealFileSystem
from ..recordlog.errors import CorruptLog, LogRewound
from ..security.records import CODEC, RECORD_TYPES
from ..security.store import SecurityStore

log = get_logger("coordinator.shards.security_mirror")

TAIL_INTERVAL_S = 0.05
"""How often shard 0's log is read for security changes (their delay to reach this shard)."""

_SECURITY_TYPES = frozenset(decl.type_id for decl in RECORD_TYPES)

_Encoded = tuple[bytes, bytes | None]
"""A record as the record log loads it: its identity (type, key length, key) and value bytes."""


class SecurityMirror:
    def __init__(self, shard0_log_dir: Path) -> None:
        self.store = SecurityStore()
        self._replay = CODEC.encoded_replayers(self.store.registration.replayers)
        self._tailer = LogTailer(RealFileSystem(), str(shard0_log_dir))
        self._directory = shard0_log_dir
        self._lock = asyncio.Lock()
        self._current: asyncio.Future[None] | None = None
        self._corrupt_logged = False
        self.records_applied = 0

    @property
    def next_offset(self) -> int:
        """Every entry of shard 0's log below this offset has been read (and applied)."""
        return self._tailer.next_offset

    async def catch_up(self) -> None:
        """Read and apply what shard 0 appended since the last read. One read at a time (the
        tailer is not thread-safe); a read outlives a cancelled caller, and the next caller
        waits for it first, so nothing read is ever left unapplied."""
        async with self._lock:
            if self._current is not None and not self._current.done():
                await asyncio.shield(self._current)
            self._current = asyncio.ensure_future(self._read_and_apply())
            await asyncio.shield(self._current)

    async def _read_and_apply(self) -> None:
        records, again = await asyncio.to_thread(self._read)
        if again:  # shard 0 cut off entries this copy had read: the copy is rebuilt from its log
            self.store = SecurityStore()
            self._replay = CODEC.encoded_replayers(self.store.registration.replayers)
        self._apply(records)

    def _read(self) -> tuple[list[_Encoded], bool]:
        """In a worker thread: the security records appended since the last read, in log order,
        and whether they are the whole log again (read from its start after `LogRewound`)."""
        found: list[_Encoded] = []

        def collect(batch: LoadBatch) -> None:
            for identity, value in batch.items():
                if (identity[0] << 8 | identity[1]) in _SECURITY_TYPES:
                    found.append((identity, value))

        again = False
        try:
            try:
                self._tailer.load(collect)
            except LogRewound as exc:
                log.warning("security_mirror_reading_again", reason=str(exc))
                found.clear()
                again = True
                self._tailer = LogTailer(RealFileSystem(), str(self._directory))
                self._tailer.load(collect)
        except CorruptLog as exc:  # shard 0 cannot load it either; keep what we have
            if not self._corrupt_logged:
                self._corrupt_logged = True
                log.error("security_mirror_log_damaged", log_dir=str(self._directory), error=str(exc))
        return found, again

    def _apply(self, records: list[_Encoded]) -> None:
        for key, value in records:
            replay_encoded_record(self._replay, key, value)
        self.records_applied += len(records)

    async def wait_for(self, offset: int, timeout_s: float) -> bool:
        """Catch up until every entry below `offset` is applied; False if that took over `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while True:
            await self.catch_up()
            if self.next_offset >= offset:
                return True
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(TAIL_INTERVAL_S / 5)

    async def run(self) -> None:
        """Catch up every `TAIL_INTERVAL_S` until cancelled."""
        while True:
            await asyncio.sleep(TAIL_INTERVAL_S)
            try:
                await self.catch_up()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # an unreadable record: keep serving with the copy we have
                log.error("security_mirror_failed", exc_info=exc)
                await asyncio.sleep(1.0)
