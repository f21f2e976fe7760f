"""Sample the resident memory of a process tree (the pipeline's Python driver and its JVM) until it
exits; print the peak of the tree's total and of each process.

    python bench/history_memwatch.py PID [--interval 0.5]
"""

from __future__ import annotations

import argparse
import time

import psutil


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("pid", type=int)
    parser.add_argument("--interval", type=float, default=0.5)
    args = parser.parse_args()
    root = psutil.Process(args.pid)
    peak_total = 0
    peak_by_name: dict[str, int] = {}
    started = time.monotonic()
    while root.is_running() and root.status() != psutil.STATUS_ZOMBIE:
        total = 0
        try:
            for proc in [root, *root.children(recursive=True)]:
                try:
                    rss = proc.memory_info().rss
                    name = proc.name()
                except psutil.NoSuchProcess:
                    continue
                total += rss
                peak_by_name[name] = max(peak_by_name.get(name, 0), rss)
        except psutil.NoSuchProcess:
            break
        peak_total = max(peak_total, total)
        time.sleep(args.interval)
    print(f"watched {time.monotonic() - started:.0f}s; peak tree RSS {peak_total / 2**20:.0f} MiB; "
          + ", ".join(f"{n} {v / 2**20:.0f} MiB" for n, v in sorted(peak_by_name.items())))


if __name__ == "__main__":
    main()
