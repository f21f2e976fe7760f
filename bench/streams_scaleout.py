"""Issue 29 point 5's first half: how long a moved task stops processing when a Kafka Streams app
scales out from two instances to three over a 200,000-key store, warm-ups on vs off, side by side.

Each run is the scenario of `tests/support/streams_scaleout.py` (the trunk client, StreamsGroupHeartbeat
v1, against a fresh embedded coordinator; a trickle of 300 records/s while the group scales out),
warm-ups on (`group.streams.num.warmup.replicas` 2, acceptable recovery lag 2,000) and off (0), the
two alternating. Reported per run, from the app's own log lines: the longest processing gap of a
moved task (its old owner's last processed record to the newcomer's first), the longest gap of the
tasks that stayed (the baseline: what a rebalance costs everyone), the newcomer's active restoration
on take-over (records, ms) and what its warm-ups loaded beforehand, the time from the newcomer's
start until it processed its tasks, and the load average. Prints numbers; asserts nothing on time.

`--mode sidecar` runs the same scenario with the coordinator in sidecar mode in front of Apache Kafka
4.0 (`KAFKA_HOME`, else `shared/kafka/kafka_2.13-4.0.0` beside the checkout; one broker started for
all runs, topics of each run's own on it): the records, counts and changelogs live on Kafka, the
group is the sidecar's. The rows then say "sidecar" beside the run number.

Needs the trunk Java clients (`KAFKA_TRUNK_CLIENTS`, else `shared/kafka/clients-4.5.0-SNAPSHOT`
beside the checkout) and a JDK; the row says why when either is missing. Three JVMs (-Xmx256m) at a
time, stopped after each run.

Run: ``.venv/bin/python -m bench.streams_scaleout [--runs N] [--keys N] [--mode sidecar]`` or ``bench/run --only streams``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.sidecar.conftest import free_base_port, sidecar_process
from tests.support.java import compile_java
from tests.support.kafka import KafkaBroker
from tests.support.server import ServerProcess
from tests.support.streams_scaleout import APP_SOURCE, STORE_KEYS, ScaleOut, run, server_settings

ROOT = Path(__file__).resolve().parent.parent
TRUNK_CLIENTS = Path("shared") / "kafka" / "clients-4.5.0-SNAPSHOT"


def trunk_clients() -> tuple[Path | None, str]:
    """The trunk client jars, or None and why not."""
    value = os.environ.get("KAFKA_TRUNK_CLIENTS")
    folder = Path(value) if value else ROOT.parent / TRUNK_CLIENTS
    if not any(folder.glob("kafka-streams-*.jar")):
        return None, f"no trunk Kafka Streams jars in {folder} (set KAFKA_TRUNK_CLIENTS)"
    if shutil.which("javac") is None or shutil.which("java") is None:
        return None, "no JDK (javac and java)"
    return folder, ""


@contextlib.contextmanager
def upstream(mode: str, workdir: Path) -> Iterator[tuple[str | None, str]]:
    """(bootstrap of the Kafka broker a sidecar fronts, "") in sidecar mode, (None, "") embedded,
    (None, why) when Kafka cannot be had; the broker is stopped on exit."""
    if mode != "sidecar":
        yield None, ""
        return
    from bench.kafka_side import kafka_home

    home, why = kafka_home()
    if home is None:
        yield None, why
        return
    broker = KafkaBroker(home, workdir / "kafka")
    try:
        broker.start()
        yield broker.bootstrap, ""
    finally:
        broker.stop()


def coordinator(where: Path, warmups: bool, kafka: str | None) -> ServerProcess:
    """A fresh coordinator: embedded, or in sidecar mode in front of `kafka`."""
    if kafka is None:
        return ServerProcess(where / "data", overrides=server_settings(warmups))
    return sidecar_process(where / "sidecar", kafka, free_base_port(), None, None,
                           **server_settings(warmups, sidecar=True))


def measure(runs: int, keys: int, workdir: Path, mode: str = "embedded") -> tuple[list[dict[str, Any]], str]:
    """`runs` scale-outs with warm-ups on and as many off, alternating; ([], why) when it cannot run."""
    jars, why = trunk_clients()
    if jars is None:
        return [], why
    app = jars, compile_java(APP_SOURCE, jars, workdir / "classes")
    results = []
    with upstream(mode, workdir) as (kafka, why):
        if why:
            return [], why
        for n in range(runs):
            for warmups in (True, False):
                where = workdir / f"run{n}-{'on' if warmups else 'off'}"
                where.mkdir(parents=True)
                server = coordinator(where, warmups, kafka)
                server.start()
                try:
                    result = run(app, server, where, warmups, keys, upstream=kafka)
                finally:
                    server.stop()
                results.append(summary(n + 1, result, mode))
                print(row_text(results[-1]), flush=True)
    return results, ""


def summary(n: int, result: ScaleOut, mode: str = "embedded") -> dict[str, Any]:
    return {
        "run": n, "mode": mode, "warmups": result.warmups,
        "moved": [t.task for t in result.moved],
        "moved_gap_ms": max(t.gap_ms for t in result.moved),
        "baseline_gap_ms": result.baseline_gap_ms,
        "restored_records": [t.restored_records for t in result.moved],
        "restore_ms": [t.restore_ms for t in result.moved],
        "warmup_records": [t.warmup_records for t in result.moved],
        "settle_s": result.settle_s,
        "duplicated": result.duplicated,
        "load": os.getloadavg()[0],
    }


def row_text(r: dict[str, Any]) -> str:
    """One Markdown table row (see HEADER)."""
    warm = "on" if r["warmups"] else "off"
    restored = ", ".join(f"{c:,} in {ms} ms" for c, ms in zip(r["restored_records"], r["restore_ms"], strict=True))
    loaded = ", ".join(f"{c:,}" for c in r["warmup_records"])
    run_label = f"{r['run']} (sidecar)" if r.get("mode") == "sidecar" else str(r["run"])
    return (f"| {run_label} | {warm} | {', '.join(r['moved'])} | **{r['moved_gap_ms']:,} ms** | "
            f"{r['baseline_gap_ms']:,} ms | {restored} | {loaded or '0'} | {r['settle_s']:.1f} s | "
            f"{r['duplicated']} | {r['load']:.2f} |")


HEADER = ("| Run | Warm-ups | Moved tasks | Longest gap of a moved task | Longest gap of a task that stayed "
          "| Newcomer's active restoration on take-over | Warm-up records loaded before | Join to processing "
          "| Keys counted twice | Load (1 min) |\n|---|---|---|---|---|---|---|---|---|---|")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2, help="runs with warm-ups on, and as many off")
    parser.add_argument("--keys", type=int, default=STORE_KEYS, help="distinct keys in the store")
    parser.add_argument("--mode", choices=("embedded", "sidecar"), default="embedded",
                        help="the coordinator embedded, or as a sidecar in front of Apache Kafka 4.0")
    args = parser.parse_args(argv)
    print(HEADER, flush=True)
    with tempfile.TemporaryDirectory(prefix="streams-scaleout-") as tmp:
        _, why = measure(args.runs, args.keys, Path(tmp), args.mode)
    if why:
        print(f"not run: {why}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
