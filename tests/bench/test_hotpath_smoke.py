"""`bench/hotpath.py` end to end on a tiny set-up, so the in-process measure cannot rot.

Only the shape of the output is checked (every API measured, responses written, the commits
accepted); never a time.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_hotpath_measures_the_heartbeats_and_the_commits() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "hotpath.py"), "--groups", "1", "--per-group", "4", "--rounds", "2"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    for api in ("heartbeat", "consumer-group-heartbeat", "offset-commit-v8", "offset-commit-v9"):
        assert re.search(rf"^{api}: \d+\.\d+ us/request", done.stdout, re.MULTILINE), done.stdout
    assert re.search(r"^share-fetch: \d+\.\d+ us/fetch of 560 records", done.stdout, re.MULTILINE), done.stdout


def test_hotpath_splits_a_share_fetch_into_its_stages() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "hotpath.py"), "--api", "share-fetch", "--stages", "--rounds", "2"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert re.search(r"^share-fetch: CPU per fetch of 560 records: main thread \d+ us, all threads \d+ us",
                     done.stdout, re.MULTILINE), done.stdout
    for stage in ("request decode", "read (cache, data plane)", "core", "answer described and encoded"):
        assert re.search(rf"^ +\d+\.\d us  {re.escape(stage)}$", done.stdout, re.MULTILINE), done.stdout
