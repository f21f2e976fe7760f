"""The shard's durable sink: core records into the record log, with the log's metrics.

`DurableSink` adapts the asyncio `GroupCommitter` to the shard's `LogSink`: every Result's records
become one entry, the committer's `durable_end` tells the shard which are durable, and
`durable_point()` is a barrier future for everything appended so far; a write the disk refused
is counted, logged (one line per kind per interval) and handed to the shard's `on_refused`. `TimedFileSystem` wraps the
real filesystem to measure write and fsync latency where they happen, in the committer's thread.
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import itertools
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import cast

from prometheus_client import REGISTRY, Counter, Gauge, Histogram
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from protocol.errors import ErrorCode

from ..recordlog import GroupCommitter, RealFileSystem, WriteRefused
from ..recordlog.fs import AppendHandle
from ..storage_errors import StorageLog
from .shard_contract import Refused

_FAST = (0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)

_go_float = cast(Callable[[float], str], floatToGoString)
"""How prometheus_client writes a bucket bound (untyped there)."""


class LoopHistogram(Collector):
    """A histogram observed from the event loop's thread only, without the lock and the checks
    `prometheus_client.Histogram.observe` takes per observation (a dozen Python calls): bucket
    counts in plain ints, exposed at scrape time. Observed once per log entry, i.e. once per
    KIP-848 member catching up after a join. A scrape from another thread may see the sum and
    the counts one observation apart."""

    def __init__(self, name: str, documentation: str, buckets: Sequence[float]) -> None:
        self.name = name
        self.documentation = documentation
        self._bounds = list(buckets)
        self._counts = [0] * (len(self._bounds) + 1)  # the last one: above every bound (+Inf)
        self._sum = 0.0
        REGISTRY.register(self)

    def observe(self, value: float) -> None:
        self._counts[bisect.bisect_left(self._bounds, value)] += 1
        self._sum += value

    def collect(self) -> Iterator[HistogramMetricFamily]:
        cumulative = list(itertools.accumulate(self._counts))
        buckets = [(_go_float(bound), count) for bound, count in zip(self._bounds, cumulative, strict=False)]
        buckets.append(("+Inf", cumulative[-1]))
        yield HistogramMetricFamily(self.name, self.documentation, buckets=buckets, sum_value=self._sum)


class LockedHistogram(LoopHistogram):
    """`LoopHistogram` observed from any thread (the log's disk thread, and compaction's when it
    writes a segment): one lock, still without `prometheus_client`'s dozen Python calls per
    observation, which the disk thread would pay twice per write-and-fsync round while holding
    the GIL the event loop waits for."""

    def __init__(self, name: str, documentation: str, buckets: Sequence[float]) -> None:
        self._lock = threading.Lock()
        super().__init__(name, documentation, buckets)

    def observe(self, value: float) -> None:
        with self._lock:
            self._counts[bisect.bisect_left(self._bounds, value)] += 1
            self._sum += value


APPEND_LATENCY = LoopHistogram("coordinator_log_append_latency_seconds",
                               "From a Result's records being appended to their entry being durable.", _FAST)
WRITE_LATENCY = LockedHistogram("coordinator_log_write_latency_seconds", "Duration of one batch write() to a segment.",
                                _FAST)
FSYNC_LATENCY = LockedHistogram("coordinator_log_fsync_latency_seconds", "Duration of one fsync of a segment.", _FAST)
BATCH_ENTRIES = LoopHistogram("coordinator_log_batch_entries", "Entries made durable together by one group commit.",
                              (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024))
LOG_BYTES = Gauge("coordinator_log_bytes", "Bytes in the record log's segment files.")
LOG_SEGMENTS = Gauge("coordinator_log_segments", "Segment files in the record log.")
LOAD_DURATION = Gauge("coordinator_log_load_duration_seconds", "How long the last start-up or takeover replay took.")
LOAD_RECORDS = Gauge("coordinator_log_load_records", "Records replayed by the last start-up or takeover.")
TRUNCATED_BYTES = Counter("coordinator_log_truncated_bytes", "Torn or corrupt tail bytes dropped at recovery.")
REFUSED_WRITES = Counter("coordinator_log_refused_writes",
                         "Record log batches the disk refused (cut back; their requests answered NOT_COORDINATOR).")
COMPACTIONS = Counter("coordinator_log_compactions", "Compaction runs, by outcome.", ["outcome"])
COMPACTION_DURATION = Histogram("coordinator_log_compaction_duration_seconds", "Duration of one compaction run.",
                                buckets=(0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300))


_storage = StorageLog("coordinator.recordlog")


class _TimedAppendHandle:
    def __init__(self, inner: AppendHandle) -> None:
        self._inner = inner

    def write(self, data: bytes) -> None:
        started = time.perf_counter()
        self._inner.write(data)
        WRITE_LATENCY.observe(time.perf_counter() - started)

    def fsync(self) -> None:
        started = time.perf_counter()
        self._inner.fsync()
        FSYNC_LATENCY.observe(time.perf_counter() - started)

    def size(self) -> int:
        return self._inner.size()

    def truncate(self, size: int) -> None:
        self._inner.truncate(size)

    def close(self) -> None:
        self._inner.close()


class TimedFileSystem(RealFileSystem):
    """The real filesystem, with write and fsync latency recorded."""

    def open_append(self, path: str) -> AppendHandle:
        return _TimedAppendHandle(super().open_append(path))


def log_size(directory: str) -> tuple[int, int]:
    """(bytes, segments) of a log directory, for the scrape-time gauges."""
    total = count = 0
    try:
        for entry in os.scandir(directory):
            if entry.name.endswith(".log"):
                total += entry.stat().st_size
                count += 1
    except FileNotFoundError:
        pass
    return total, count


class DurableSink:
    """`LogSink` over a `GroupCommitter`."""

    def __init__(self, committer: GroupCommitter) -> None:
        self.committer = committer
        self._appended: collections.deque[tuple[int, float]] = collections.deque()
        """(offset, perf_counter at append) of the entries not yet durable, for APPEND_LATENCY:
        timed when the committer releases them, without a callback per entry."""
        self._on_durable: Callable[[int], None] | None = None
        self._on_refused: Refused | None = None
        committer.on_released = BATCH_ENTRIES.observe
        committer.on_durable = self._durable

    def append(self, records: Sequence[tuple[int, bytes, bytes | None]], timestamp_ms: int) -> int:
        offset = self.committer.append_entry(records, timestamp_ms)  # (type, key, value), as the log takes
        self._appended.append((offset, time.perf_counter()))
        return offset

    @property
    def durable_end(self) -> int:
        return self.committer.durable_end

    def watch(self, on_durable: Callable[[int], None],
              on_refused: Refused | None = None) -> None:
        self._on_durable = on_durable
        self._on_refused = on_refused
        self.committer.on_refused = self._refused if on_refused is not None else None

    def _refused(self, exc: WriteRefused) -> None:
        REFUSED_WRITES.inc()
        _storage.failed("group_log_write_refused", "group_log", exc.__cause__ or exc,
                        first_offset=exc.first_offset)
        appended = self._appended
        while appended and appended[-1][0] >= exc.first_offset:
            appended.pop()
        if self._on_refused is not None:
            self._on_refused(exc.first_offset, ErrorCode.NOT_COORDINATOR)

    def _durable(self, durable_end: int) -> None:
        appended = self._appended
        now = time.perf_counter()
        observe = APPEND_LATENCY.observe
        while appended and appended[0][0] < durable_end:
            observe(now - appended.popleft()[1])
        if self._on_durable is not None:
            self._on_durable(durable_end)

    def durable_point(self) -> asyncio.Future[int] | None:
        committer = self.committer
        if committer.durable_end >= committer.log.next_offset:
            return None
        return committer.barrier()
