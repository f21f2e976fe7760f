"""`bench/streams_assignor_bench.py` end to end at a small group, so the measure cannot rot: every
Kafka shape and the warm-up step timed, the code before beside the current one. Never a time."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_streams_assignor_bench_times_every_shape_before_and_after() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "streams_assignor_bench.py"), "--members", "20", "--repeat", "2",
         "--before"], cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    timed = re.findall(r"^  (.+?)\s+\d+\.\d / +\d+\.\d ms   before +\d+\.\d / +\d+\.\d ms \(\d+\.\dx\)",
                       done.stdout, re.MULTILINE)
    shapes = [" ".join(label.split()) for label in timed]
    for kind in ("full", "incremental"):
        for per_process in (1, 50):
            for offsets in ("none", "owned+dormant"):
                assert f"{kind} {per_process}/process offsets={offsets}" in shapes, done.stdout
    assert shapes.count("warm-up step, 1/process, +100 members") == 1, done.stdout
    assert shapes.count("warm-up step, 50/process, +100 members") == 1, done.stdout
