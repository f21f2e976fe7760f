"""The structured log: every line is one JSON document, even when processes share stdout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

_WRITER = """
import sys
from coordinator.logging import configure, get_logger
configure(json=True)
log = get_logger("test")
for i in range(int(sys.argv[1])):
    log.info("line", writer=sys.argv[2], i=i, padding="x" * 200)
"""


def test_processes_sharing_unbuffered_stdout_never_interleave_within_a_line(tmp_path: Path) -> None:
    # A supervisor's shards share its stdout, and the Docker image sets PYTHONUNBUFFERED=1, under
    # which a message and its newline written apart let another process's line land between them.
    lines = 3000
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    log_path = tmp_path / "shared.log"
    with open(log_path, "ab") as shared:
        writers = [subprocess.Popen([sys.executable, "-c", _WRITER, str(lines), name], stdout=shared, env=env)
                   for name in ("a", "b", "c")]
        for writer in writers:
            assert writer.wait(timeout=60) == 0
    entries = [json.loads(line) for line in log_path.read_text().splitlines()]  # fails on a glued line
    for name in ("a", "b", "c"):
        assert [e["i"] for e in entries if e["writer"] == name] == list(range(lines))
