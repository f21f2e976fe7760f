"""Two sidecars side by side on Produce: another checkout's and this one's, against the same upstream,
in one run, with the direct path as the reference.

`bench/sidecar_throughput.py` compares one sidecar with the direct path; a change to the
forwarding path is judged by running the sidecar before and after it in the same sitting, because
on a shared machine the load moves by 2x within seconds. Upstream: librdkafka's 3-broker mock
cluster; three sides (direct, the other checkout's sidecar, this checkout's), each with its own
producer (acks=all, linger 5 ms) kept open, take turns of `--messages` 1 KB keyed messages in
rotating order (all six orders in turn). Printed per sidecar: throughput as a ratio of direct over
all turns, the median per-turn ratio, and its CPU per MB produced. Each sidecar process runs with
its checkout as working directory and PYTHONPATH (`python -m` puts the working directory first).

Usage: .venv/bin/python bench/sidecar_versions.py OTHER_CHECKOUT [--turns 18] [--messages 100000]
(e.g. `git worktree add /tmp/before <commit>` or `git archive <commit> | tar -x -C /tmp/before`)
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import tempfile
from pathlib import Path

from confluent_kafka import Producer

from bench.sidecar_throughput import PRODUCER, cpu_seconds, produce, start_mock
from tests.sidecar.conftest import free_base_port
from tests.support.server import ServerProcess

HERE = Path(__file__).resolve().parent.parent


def start_sidecar(checkout: Path, upstream: str, data_dir: Path) -> ServerProcess:
    here, path = os.getcwd(), os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(checkout)
    os.chdir(checkout)
    try:
        return ServerProcess(data_dir, overrides={"upstream.bootstrap.servers": upstream,
                                                  "sidecar.listener.base.port": str(free_base_port())}).start(wait=False)
    finally:
        os.chdir(here)
        if path is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("other", type=Path, help="the other checkout (its sidecar is 'other')")
    parser.add_argument("--turns", type=int, default=18)
    parser.add_argument("--messages", type=int, default=100_000, help="messages per turn and side")
    args = parser.parse_args()
    if not (args.other / "coordinator").is_dir():
        print(f"{args.other} is not a checkout of this project (no coordinator/)", file=sys.stderr)
        return 2
    print(f"load average before: {os.getloadavg()}", flush=True)
    mock, upstream = start_mock()
    sidecars: dict[str, ServerProcess] = {}
    producers: dict[str, Producer] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="sidecar-versions-") as tmp:
            for name, checkout in (("other", args.other.resolve()), ("this", HERE)):
                sidecars[name] = start_sidecar(checkout, upstream, Path(tmp) / name)
            for sidecar in sidecars.values():
                sidecar.wait_ready()
            bootstrap = {"direct": upstream} | {name: s.bootstrap for name, s in sidecars.items()}
            producers = {side: Producer({"bootstrap.servers": b, **PRODUCER}) for side, b in bootstrap.items()}
            for side, producer in producers.items():  # connections and metadata before anything is timed
                produce(producer, f"warm-up-{side}", min(args.messages, 20_000))
            seconds = dict.fromkeys(producers, 0.0)
            cpu = dict.fromkeys(sidecars, 0.0)
            per_turn: dict[str, list[float]] = {name: [] for name in sidecars}
            orders = list(itertools.permutations(producers))
            for turn in range(args.turns):
                took = {}
                for side in orders[turn % len(orders)]:
                    pid = sidecars[side].proc.pid if side in sidecars and sidecars[side].proc else None
                    before = cpu_seconds(pid) if pid else 0.0
                    took[side] = produce(producers[side], f"turn-{side}-{turn}", args.messages)
                    if pid:
                        cpu[side] += cpu_seconds(pid) - before
                    seconds[side] += took[side]
                for name in sidecars:
                    per_turn[name].append(took["direct"] / took[name])
            mb = args.turns * args.messages * 1024 / 1e6
            print(f"load average after: {os.getloadavg()}")
            print(f"direct: {args.turns * args.messages / seconds['direct']:,.0f} messages/s")
            for name in sidecars:
                print(f"{name} ({args.other if name == 'other' else HERE}): ratio {seconds['direct'] / seconds[name]:.2f}, "
                      f"median per turn {statistics.median(per_turn[name]):.2f}, "
                      f"CPU {cpu[name] * 1000 / mb:.2f} ms per MB produced")
    finally:
        for sidecar in sidecars.values():
            sidecar.stop()
        mock.kill()
        mock.wait(10)
        if mock.stdout is not None:
            mock.stdout.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
