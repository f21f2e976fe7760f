"""`coordinator log dump` on the data directory of a real server that a real confluent-kafka group
used: records carry their type names and their keys and values as objects with field names (the
consumer-protocol bytes of classic members decoded), and the dump is pipe-safe: `| head -1` ends it
quietly, as it ends `cat`."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition

from tests.support.clients import make_member, poll_until
from tests.support.server import ServerProcess

pytestmark = pytest.mark.interop

COMMITS = 60
METADATA = "m" * 3000
"""Each commit of both partitions dumps about 6 kB: the whole dump is far larger than a pipe's
buffer (64 kB on Linux), so a reader that goes away is certain to break the writer's pipe."""


@pytest.fixture(scope="module")
def used_data_dir(tmp_path_factory) -> Iterator[Path]:
    """A data directory where group `dumped` joined topic t (2 partitions) and committed COMMITS times."""
    data = tmp_path_factory.mktemp("dump") / "data"
    server = ServerProcess(data, overrides={"topics": "t:2"}).start()
    try:
        member = make_member(server.bootstrap, "dumped", "dump-client", ["t"])
        try:
            poll_until([member], lambda: len(member.assignment()) == 2, message="assignment")
            for offset in range(1, COMMITS + 1):
                member.consumer.commit(offsets=[TopicPartition("t", p, offset, metadata=METADATA) for p in (0, 1)],
                                       asynchronous=False)
        finally:
            member.close()
        yield data
    finally:
        server.stop()


def dump_command(data: Path) -> str:
    return shlex.join([sys.executable, "-m", "coordinator", "log", "dump", "--data-dir", str(data)])


def test_records_have_type_names_and_named_fields(used_data_dir: Path) -> None:
    run = subprocess.run([sys.executable, "-m", "coordinator", "log", "dump", "--data-dir", str(used_data_dir)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    records = [r for line in run.stdout.splitlines() for r in json.loads(line)["records"]]

    commits = [r for r in records if r["type"] == "OffsetCommit"]
    assert len(commits) == 2 * COMMITS
    last = commits[-1]
    assert last["type_id"] == 1
    assert last["key"] == {"group": "dumped", "topic": "t", "partition": 1}
    assert last["value"]["offset"] == COMMITS
    # confluent-kafka-python sends the metadata string with its C terminator: the NUL is the client's.
    assert last["value"]["metadata"].rstrip("\x00") == METADATA
    assert set(last["value"]) == {"offset", "leader_epoch", "metadata", "commit_timestamp", "expire_timestamp",
                                  "topic_id"}
    assert last["value"]["topic_id"] is None  # committed by name; OffsetCommit v10 commits carry the id

    groups = [r for r in records if r["type"] == "GroupMetadata" and r["value"] and r["value"]["members"]]
    assert groups, "the group's join was logged"
    value = groups[-1]["value"]
    assert groups[-1]["key"] == {"group": "dumped"}
    assert (value["protocol_type"], value["protocol"]) == ("consumer", "range")
    [member] = value["members"]
    assert member["client_id"] == "dump-client"
    assert member["subscription"]["topics"] == ["t"]
    assert member["assignment"] == {"t": [0, 1]}

    [epoch] = [r for r in records if r["type"] == "CoordinatorEpoch"]
    assert epoch["key"] == {} and set(epoch["value"]) == {"epoch", "writer_id"}


def test_a_reader_that_stops_early_ends_the_dump_quietly(used_data_dir: Path) -> None:
    # The user's command line, through a real shell pipe; PIPESTATUS is the dump's own exit status.
    script = f'set -o pipefail; {dump_command(used_data_dir)} | head -1; echo "dump-status=${{PIPESTATUS[0]}}"'
    run = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
    first, status = run.stdout.splitlines()
    assert json.loads(first)["offset"] == 0
    assert status == "dump-status=141"  # what the shell reports for `cat big | head -1`
    assert run.stderr == ""


def test_the_pipe_closed_after_some_lines_also_ends_quietly(used_data_dir: Path) -> None:
    dump = subprocess.Popen([sys.executable, "-m", "coordinator", "log", "dump", "--data-dir", str(used_data_dir)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert dump.stdout is not None and dump.stderr is not None
    lines = [dump.stdout.readline() for _ in range(5)]
    assert all(json.loads(line)["offset"] == i for i, line in enumerate(lines))
    dump.stdout.close()
    assert dump.wait(60) == 141
    assert dump.stderr.read() == b""
    dump.stderr.close()


def test_records_it_cannot_decode_keep_their_bytes_and_the_reason() -> None:
    from coordinator.logtool import _record_json

    unknown = _record_json(4242, b"\x01\x02", None)
    assert unknown == {"type": "Unknown", "type_id": 4242, "key": "0102", "value": None,
                       "error": "unknown record type 4242"}
    garbled = _record_json(1, b"\xc1", b"\x00\x00\x90")
    assert (garbled["type"], garbled["type_id"], garbled["key"], garbled["value"]) == ("Undecodable", 1, "c1", "000090")
    assert garbled["error"]
