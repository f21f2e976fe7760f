"""examples/share_consumer.py, the share consumer README's Admin CLI section makes its share group
with, run as a reader runs it against a real server: with `--from-earliest` it sets the group's
`share.auto.offset.reset` and takes records produced before the group existed, acknowledges them
and leaves (the group Empty, its start offsets past them); records that do not come, or a cluster
that does not answer, are one line and exit code 1."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.clients import produce
from tests.support.server import ServerProcess, free_port

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "share_consumer.py"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    process = ServerProcess(tmp_path_factory.mktemp("share-example") / "data", overrides={"topics": "orders:2"})
    process.start()
    try:
        yield process
    finally:
        process.stop()


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60)


def described(server: ServerProcess, group: str) -> dict:
    run = subprocess.run([sys.executable, "-m", "coordinator", "groups", "describe", group, "--json",
                          "--bootstrap", server.bootstrap], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def test_from_earliest_takes_what_was_there_acknowledges_it_and_leaves_the_group_empty(server) -> None:
    produce(server.bootstrap, "orders", 20, 2)  # before the group exists: `latest` would skip them
    done = run("--bootstrap", server.bootstrap, "--group", "early", "--topic", "orders", "--count", "20",
               "--from-earliest")
    assert done.returncode == 0, done.stderr
    assert "[early] acknowledged 20 records of orders (0: 10, 1: 10) and left the group" in done.stdout
    group = described(server, "early")
    assert (group["group_type"], group["state"], group["members"]) == ("share", "Empty", [])
    assert {o["partition"]: (o["start_offset"], o["lag"]) for o in group["share_offsets"]} == {0: (10, 0), 1: (10, 0)}


def test_records_that_do_not_come_are_one_line_and_exit_1(server) -> None:
    # No --from-earliest: the server's default, latest, starts the group after what is there.
    late = run("--bootstrap", server.bootstrap, "--group", "late", "--topic", "orders", "--count", "5",
               "--timeout", "3")
    assert late.returncode == 1
    assert "[late] acknowledged 0 records of orders (none) and left the group" in late.stdout
    assert late.stderr.strip().splitlines()[-1] == "share_consumer.py: only 0 of 5 records came within 3 s"
    assert "Traceback" not in late.stderr


def test_a_cluster_that_does_not_answer_is_one_line_and_exit_1() -> None:
    bootstrap = f"127.0.0.1:{free_port()}"  # nothing listens there
    silent = run("--bootstrap", bootstrap, "--from-earliest", "--timeout", "2")
    assert silent.returncode == 1
    assert silent.stderr.strip().splitlines()[-1] == f"share_consumer.py: no answer from {bootstrap} within 2 s"
    assert "Traceback" not in silent.stderr
