"""Counting requests, errors and latencies; percentiles by sorting (exact, cheap at our sizes)."""

from __future__ import annotations

import array
import collections
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Recorder:
    """Latencies in ns and error codes; only while `recording` is true."""

    recording: bool = False
    latencies: array.array[int] = field(default_factory=lambda: array.array("q"))
    errors: collections.Counter[str] = field(default_factory=collections.Counter)
    requests: int = 0
    started: float = 0.0
    stopped: float = 0.0

    def start(self) -> None:
        self.recording = True
        self.started = time.perf_counter()

    def stop(self) -> None:
        self.recording = False
        self.stopped = time.perf_counter()

    def ok(self, latency_ns: int) -> None:
        if self.recording:
            self.requests += 1
            self.latencies.append(latency_ns)

    def error(self, name: str, latency_ns: int = -1) -> None:
        if self.recording:
            self.requests += 1
            self.errors[name] += 1
            if latency_ns >= 0:
                self.latencies.append(latency_ns)

    def merge(self, other: Recorder) -> None:
        self.latencies.extend(other.latencies)
        self.errors.update(other.errors)
        self.requests += other.requests
        self.started = min(self.started, other.started) if self.started else other.started
        self.stopped = max(self.stopped, other.stopped)

    def summary(self) -> dict[str, Any]:
        elapsed = max(self.stopped - self.started, 1e-9)
        return {
            "requests": self.requests,
            "seconds": round(elapsed, 3),
            "rps": self.requests / elapsed,
            **percentiles(self.latencies),
            "errors": dict(self.errors),
        }


def percentiles(latencies_ns: array.array[int] | list[int]) -> dict[str, float]:
    """p50/p99/p99.9/max in milliseconds (nan when empty)."""
    if not latencies_ns:
        nan = float("nan")
        return {"p50_ms": nan, "p99_ms": nan, "p999_ms": nan, "max_ms": nan}
    ordered = sorted(latencies_ns)
    n = len(ordered)

    def at(q: float) -> float:
        return ordered[min(n - 1, int(q * n))] / 1e6

    return {"p50_ms": at(0.50), "p99_ms": at(0.99), "p999_ms": at(0.999), "max_ms": ordered[-1] / 1e6}
