"""The admin CLI against real KIP-848 consumer groups on the real server (ConsumerGroupDescribe)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support.clients import make_member, owns_each_exactly_once, poll_until, produce
from tests.support.server import ServerProcess

pytestmark = pytest.mark.interop


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "coordinator", *args], capture_output=True, text=True, timeout=60)


def test_list_and_describe_a_consumer_group(tmp_path) -> None:
    server = ServerProcess(tmp_path / "data", overrides={"topics": "t:4"}).start()
    members = []
    try:
        produce(server.bootstrap, "t", 40, 4)
        members = [make_member(server.bootstrap, "modern", f"c{i}", ["t"], **{"group.protocol": "consumer"}) for i in range(2)]
        poll_until(members, lambda: owns_each_exactly_once(members, 4) and sum(len(m.consumed) for m in members) >= 40,
                   message="assignment and consumption")
        for m in members:
            if m.consumed:  # librdkafka refuses a commit with nothing consumed (_NO_OFFSET)
                m.consumer.commit(asynchronous=False)
        listed = json.loads(cli("groups", "list", "--bootstrap", server.bootstrap, "--json").stdout)
        assert [(g["group_id"], g["group_type"], g["state"]) for g in listed] == [("modern", "consumer", "Stable")]
        described = cli("groups", "describe", "modern", "--bootstrap", server.bootstrap, "--json")
        assert described.returncode == 0, described.stderr
        view = json.loads(described.stdout)
        text = json.dumps(view)
        for m in members:
            assert m.consumer.memberid() in text
        assert "uniform" in text
        table = cli("groups", "describe", "modern", "--bootstrap", server.bootstrap)
        assert "ASSIGNMENT-EPOCH" in table.stdout and "LAG" in table.stdout
    finally:
        for m in members:
            m.close()
        server.stop()
