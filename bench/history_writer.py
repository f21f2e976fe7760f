"""How much the history costs the event loop, and how fast batches are written.

    python bench/history_writer.py [--events 1000000]

Prints the observe() cost per event (what the shard pays on the loop) for a typical mix of events,
and the write throughput of the flush (encode + append, done in a worker thread by the server).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from coordinator.core import events
from coordinator.history.writer import HistoryWriter


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=1_000_000)
    args = parser.parse_args()
    mix = [
        events.MemberJoined("group-1", "member-1", None, "client", "/127.0.0.1"),
        events.RebalanceStarted("group-1", "classic", 4, "new member joined"),
        events.GroupStateChanged("group-1", "classic", "Stable", "PreparingRebalance"),
        events.MemberAssignmentChanged("group-2", "member-2", 7, 2, 0),
        events.OffsetsCommitted("group-1", 3),  # skipped: not history
    ]
    with tempfile.TemporaryDirectory() as tmp:
        writer = HistoryWriter(Path(tmp), node_id=1, cluster_id="bench", segment_bytes=100 << 20,
                               segment_ms=86_400_000, retention_ms=-1, max_buffered_rows=args.events * 2)
        writer.open()
        started = time.perf_counter()
        for i in range(args.events):
            writer.observe(mix[i % len(mix)])
        observed = time.perf_counter() - started
        rows = len(writer._pending)
        started = time.perf_counter()
        writer.flush()
        written = time.perf_counter() - started
        size = sum(p.stat().st_size for p in Path(tmp).iterdir())
    print(f"observe: {observed / args.events * 1e6:.2f} us/event on the loop ({args.events} events, {rows} rows)")
    print(f"flush:   {rows / written:,.0f} rows/s, {size / written / 2**20:.0f} MiB/s, {size / rows:.0f} bytes/row")


if __name__ == "__main__":
    main()
