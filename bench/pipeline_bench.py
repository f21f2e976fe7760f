"""The rebalance pipeline at scale: synthetic history → `pipeline.rebalance_report` with `local[*]`.

    python -m bench.pipeline_bench --events 10000000 [--groups 10000] [--days 7] [--data DIR] [--runs N]

Generates the synthetic dataset once (`pipeline.synthetic`; kept in DIR and reused while its
parameters match; its time is reported on its own), then runs the report N times as a child
process exactly as a user would (default settings: Spark's default driver memory, `local[*]`),
sampling every 0.5 s the resident memory of the Python driver and of the JVM it starts. Prints, per
run, the wall time, the CPU seconds, the peak memory of each, whether the log has an
OutOfMemoryError, and the load average before and after (the machine may be shared), and a row for
BENCHMARKS.md. Asserts nothing on time.

The measured span is the report's process, from its start (JVM start-up included) to its exit;
generating the input is a fixture of the bench and is reported on its own.

Memory is per process, not summed over the tree: the JVM starts short-lived helpers (a `chmod`
per directory it creates), and a helper caught between fork and exec shows the JVM's pages as its
own resident memory, which a sum would count twice.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent


def generate(events: int, groups: int, days: int, data: Path) -> float | None:
    """Seconds spent generating, None when the dataset was already there."""
    marker = data / "_PARAMS.json"
    params = {"events": events, "groups": groups, "days": days}
    if marker.exists() and json.loads(marker.read_text()) == params:
        return None
    from pipeline.synthetic import generate as synthesize

    started = time.monotonic()
    synthesize(events, groups, data, days)
    marker.write_text(json.dumps(params))
    return time.monotonic() - started


def run_report(data: Path, output: Path, log: Path) -> tuple[float, int, int, int, float]:
    """(wall seconds, peak RSS bytes of the Python driver, peak RSS bytes of the JVM, exit code, CPU
    seconds of the tree) of one report run.

    CPU seconds (user + system of the driver, the JVM and their helpers) say what the run costs on
    a shared machine, where the wall time depends on the other load."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SPARK_LOCAL_IP": "127.0.0.1"}
    started = time.monotonic()
    with open(log, "wb") as handle:
        child = subprocess.Popen([sys.executable, "-m", "pipeline.rebalance_report", "--input", str(data),
                                  "--output", str(output)], stdout=handle, stderr=subprocess.STDOUT, env=env)
        root = psutil.Process(child.pid)
        driver = jvm = 0
        cpu: dict[int, float] = {}
        while child.poll() is None:
            try:
                for proc in [root, *root.children(recursive=True)]:
                    try:
                        with proc.oneshot():
                            rss = proc.memory_info().rss
                            times = proc.cpu_times()
                            name = proc.name()
                    except psutil.NoSuchProcess:
                        continue
                    cpu[proc.pid] = times.user + times.system
                    if proc.pid == root.pid:
                        driver = max(driver, rss)
                    elif name == "java":
                        jvm = max(jvm, rss)
            except psutil.NoSuchProcess:
                break
            time.sleep(0.5)
    return time.monotonic() - started, driver, jvm, child.returncode, sum(cpu.values())


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.pipeline_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--groups", type=int, default=10_000)
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--data", type=Path, default=None, help="dataset directory (default: under /tmp, reused)")
    parser.add_argument("--runs", type=int, default=1, help="report runs on the same dataset (default: %(default)s)")
    args = parser.parse_args()
    data = args.data or Path(tempfile.gettempdir()) / f"pipeline-bench-{args.events}-{args.groups}-{args.days}"
    load = os.getloadavg()[0]
    generated = generate(args.events, args.groups, args.days, data)
    size = sum(f.stat().st_size for f in data.rglob("*.parquet"))
    print(f"dataset {data}: {size / 2**20:.0f} MiB Parquet"
          + (f", generated in {generated:.0f}s (load average {load:.1f} before)" if generated is not None
             else " (reused)"), flush=True)
    failed = False
    for run in range(1, args.runs + 1):
        with tempfile.TemporaryDirectory() as tmp:
            load_before = os.getloadavg()
            wall, driver, jvm, code, cpu = run_report(data, Path(tmp) / "report", Path(tmp) / "report.log")
            load_after = os.getloadavg()
            log = (Path(tmp) / "report.log").read_text(errors="replace")
        oom = "OutOfMemoryError" in log
        failed |= code != 0 or oom
        print(log.strip().splitlines()[-1] if log.strip() else "(no output)")
        print(f"run {run}: {wall:.1f}s wall, {cpu:.0f} CPU-s, peak RSS {jvm / 2**20:.0f} MiB (JVM), "
              f"{driver / 2**20:.0f} MiB (Python driver), exit {code}, OutOfMemoryError in log: {'yes' if oom else 'no'}; "
              f"load average before {load_before[0]:.1f}, after {load_after[0]:.1f} ({os.cpu_count()} cores)", flush=True)
        print(f"| `pipeline.rebalance_report` `local[*]`, default memory | {args.events:,} events, {args.groups:,} groups, "
              f"{args.days} days ({size / 2**20:.0f} MiB Parquet) | {wall:.0f} s ({cpu:.0f} CPU-s) | "
              f"{jvm / 2**20:.0f} MiB JVM, {driver / 2**20:.0f} MiB Python | load {load_before[0]:.1f}→{load_after[0]:.1f} |")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
