"""`coordinator groups` and `coordinator offsets` for share groups (KIP-932), run as subprocesses
against the real server, the group made by a real share consumer (confluent-kafka's ShareConsumer):

- `groups list` lists it with type `share`; `groups describe` shows its member, the partitions'
  start offsets, log ends, lag and what is in flight by state;
- `offsets reset` is refused while the consumer is in the group (an Empty group only, as
  kafka-share-groups.sh), prints the plan without `--execute`, sets the start offsets with it (the
  next consumer is given the records again), and refuses `--shift-by` in one line;
- `offsets delete --topic` forgets the topic, `groups delete` the whole group; an unknown group is
  one line and exit code 1.

What the group holds is read back with the Kafka APIs the CLI does not use for it where it can be
(the share consumer's own deliveries), and with `groups describe --json` otherwise.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import AcknowledgeType, ShareConsumer

from tests.support.clients import produce
from tests.support.server import ServerProcess, wait_until

pytestmark = pytest.mark.interop

RECORDS = 20  # over 2 partitions: offsets 0..9 in each


def cli(server: ServerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "coordinator", *args, "--bootstrap", server.bootstrap],
                          capture_output=True, text=True, timeout=60)


def described(server: ServerProcess, group: str) -> dict:
    run = cli(server, "groups", "describe", group, "--json")
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def starts(server: ServerProcess, group: str) -> dict[int, int]:
    return {o["partition"]: o["start_offset"] for o in described(server, group)["share_offsets"]
            if o["start_offset"] is not None}


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[ServerProcess]:
    process = ServerProcess(tmp_path_factory.mktemp("share-cli") / "data",
                            overrides={"topics": "orders:2", "share.auto.offset.reset": "earliest",
                                       "group.share.heartbeat.interval.ms": "1000"})
    process.start()
    try:
        produce(process.bootstrap, "orders", RECORDS, 2)
        yield process
    finally:
        process.stop()


def consume(server: ServerProcess, group: str, until: int, accept: bool = True) -> tuple[ShareConsumer, list]:
    """A share consumer of `group` that polled until it was given `until` records (explicit
    acknowledgement: accepted if `accept`, else held)."""
    consumer = ShareConsumer({"bootstrap.servers": server.bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "explicit"})
    consumer.subscribe(["orders"])
    seen: list[tuple[int, int]] = []
    deadline = time.monotonic() + 60
    while len(seen) < until and time.monotonic() < deadline:
        for message in consumer.poll(0.5):
            assert message.error() is None, message.error()
            seen.append((message.partition(), message.offset()))
            if accept:
                consumer.acknowledge(message, AcknowledgeType.ACCEPT)
    assert len(seen) >= until, seen
    return consumer, seen


def test_list_and_describe_show_a_share_group_with_its_partitions_and_what_is_in_flight(server) -> None:
    consumer, seen = consume(server, "holding", 1, accept=False)
    try:
        listed = cli(server, "groups", "list", "--json")
        assert listed.returncode == 0, listed.stderr
        assert {"group_id": "holding", "group_type": "share", "state": "Stable",
                "protocol_type": "share"} in json.loads(listed.stdout)

        group = described(server, "holding")
        assert (group["group_type"], group["state"], group["protocol"]) == ("share", "Stable", "simple")
        (member,) = group["members"]
        assert member["assignment"] == {"orders": [0, 1]}
        rows = {o["partition"]: o for o in group["share_offsets"]}
        assert set(rows) == {0, 1}
        held = sum(o["in_flight"]["acquired"] for o in rows.values())
        assert held == len(seen), "the records it was given are in flight, acquired"
        for o in rows.values():
            assert o["start_offset"] == 0 and o["end_offset"] == RECORDS // 2 and o["lag"] == RECORDS // 2
            assert o["members"] == [member["member_id"]]

        text = cli(server, "groups", "describe", "holding")
        assert text.returncode == 0, text.stderr
        assert "START-OFFSET" in text.stdout and "ACQUIRED" in text.stdout and "TYPE share" in text.stdout
    finally:
        consumer.close()


def test_reset_needs_an_empty_group_plans_without_execute_and_sets_start_offsets_with_it(server) -> None:
    consumer, _ = consume(server, "resetting", RECORDS)
    try:
        consumer.commit_sync()  # the acknowledgements reach the coordinator
        wait_until(lambda: starts(server, "resetting") == {0: 10, 1: 10}, timeout=20, message="all acknowledged")
        refused = cli(server, "offsets", "reset", "resetting", "--all-topics", "--to-earliest", "--execute")
        assert refused.returncode == 1
        assert "inactive (Empty), but the current state is Stable" in refused.stderr
        assert "Traceback" not in refused.stderr
    finally:
        consumer.close()
    wait_until(lambda: described(server, "resetting")["state"] == "Empty", timeout=20, message="the group empty")

    dry = cli(server, "offsets", "reset", "resetting", "--topic", "orders:0", "--to-offset", "4", "--json")
    assert dry.returncode == 0, dry.stderr
    plan = json.loads(dry.stdout)
    assert [(c["partition"], c["previous_offset"], c["new_offset"]) for c in plan["changes"]] == [(0, 10, 4)]
    assert "dry run" in dry.stderr and starts(server, "resetting") == {0: 10, 1: 10}, "nothing changed"

    done = cli(server, "offsets", "reset", "resetting", "--all-topics", "--to-earliest", "--execute")
    assert done.returncode == 0, done.stderr
    assert starts(server, "resetting") == {0: 0, 1: 0}
    again, redelivered = consume(server, "resetting", RECORDS)
    again.commit_sync()
    again.close()
    assert sorted(set(redelivered)) == sorted({(p, o) for p in (0, 1) for o in range(10)}), "given again"

    shifted = cli(server, "offsets", "reset", "resetting", "--all-topics", "--shift-by", "1")
    assert shifted.returncode == 1 and "--shift-by is not an option for share groups" in shifted.stderr


def test_delete_offsets_forgets_a_topic_and_an_unknown_group_is_one_line(server) -> None:
    consumer, _ = consume(server, "deleting", RECORDS)
    consumer.commit_sync()
    consumer.close()
    wait_until(lambda: described(server, "deleting")["state"] == "Empty", timeout=20, message="the group empty")
    assert starts(server, "deleting") == {0: 10, 1: 10}

    deleted = cli(server, "offsets", "delete", "deleting", "--topic", "orders")
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout.split() == ["TOPIC", "STATUS", "orders", "Successful"]
    assert described(server, "deleting")["share_offsets"] == []
    gone = cli(server, "groups", "delete", "deleting")  # DeleteGroups: an empty share group goes whole
    assert gone.returncode == 0, gone.stderr
    assert cli(server, "groups", "describe", "deleting").returncode == 1

    unknown = cli(server, "offsets", "delete", "nobody", "--topic", "orders")
    assert unknown.returncode == 1 and "Traceback" not in unknown.stderr
    assert unknown.stderr.strip().splitlines() == [
        "coordinator: error: cannot delete the offsets of group 'nobody': GROUP_ID_NOT_FOUND "
        "(offsets delete is for share groups)"]
