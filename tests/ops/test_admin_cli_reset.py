"""`coordinator offsets reset` as Kafka's `kafka-consumer-groups --reset-offsets`, run as a subprocess
against the real server with groups made by a real client (confluent-kafka):

- without `--execute` it prints the plan (GROUP TOPIC PARTITION NEW-OFFSET) and commits nothing;
- each of Kafka's selectors plans Kafka's offsets (clamping, fall-backs, time lookups by ListOffsets);
- the scopes `--all-topics`, `--topic T`, `--topic T:0,1`;
- `--execute` commits, and the group's consumers resume from there;
- refused for a group with live members, bad arguments are usage errors (exit 2), never tracebacks.

Committed offsets are read back with confluent-kafka's `committed()`, not with the CLI under test.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from coordinator.cli import main
from tests.support.clients import Member, make_member, poll_until
from tests.support.server import ServerProcess, wait_until

pytestmark = pytest.mark.interop

PARTITIONS = 3
RECORDS = 10
"""Records per partition: offsets 0-4 are two days old, offsets 5-9 a minute old."""
NOW = datetime.now(UTC).replace(microsecond=0)
OLD = NOW - timedelta(days=2)
RECENT = NOW - timedelta(minutes=1)


def timestamp_of(offset: int) -> datetime:
    return (OLD if offset < 5 else RECENT) + timedelta(seconds=offset)


def kafka_datetime(moment: datetime, zone: timezone = UTC) -> str:
    """YYYY-MM-DDTHH:mm:SS.sss+hh:mm, one of the forms Kafka's --to-datetime accepts."""
    return moment.astimezone(zone).isoformat(timespec="milliseconds")


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "coordinator", *args], capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[ServerProcess]:
    process = ServerProcess(tmp_path_factory.mktemp("reset") / "data",
                            overrides={"topics": f"orders:{PARTITIONS},live:2,resumed:{PARTITIONS}"})
    process.start()
    try:
        for topic in ("orders", "resumed"):
            produce_timestamped(process.bootstrap, topic)
        yield process
    finally:
        process.stop()


def produce_timestamped(bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": False})
    for offset in range(RECORDS):
        for partition in range(PARTITIONS):
            producer.produce(topic, value=f"{partition}-{offset}".encode(), partition=partition,
                             timestamp=int(timestamp_of(offset).timestamp() * 1000))
        producer.flush(30)  # one batch per offset: each record keeps its own timestamp batch
    assert producer.flush(30) == 0


def committed(bootstrap: str, group: str, topic: str, partitions: int = PARTITIONS) -> dict[int, int | None]:
    """The group's committed offsets as confluent-kafka reads them (None: nothing committed)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        return {tp.partition: tp.offset if tp.offset >= 0 else None for tp in found}
    finally:
        consumer.close()


def joined(server: ServerProcess, group: str, topic: str, partitions: int) -> Member:
    member = make_member(server.bootstrap, group, f"{group}-client", [topic])
    poll_until([member], lambda: len(member.assignment()) == partitions, message=f"{group} assignment")
    return member


def group_state(server: ServerProcess, group: str) -> str | None:
    run = cli("groups", "list", "--json", "--bootstrap", server.bootstrap)
    assert run.returncode == 0, run.stderr
    return next((g["state"] for g in json.loads(run.stdout) if g["group_id"] == group), None)


def emptied_group(server: ServerProcess, group: str, topic: str, offsets: dict[int, int]) -> None:
    """A classic consumer group that consumed `topic`, committed `offsets`, and left (Empty)."""
    member = joined(server, group, topic, PARTITIONS)
    try:
        member.consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    finally:
        member.close()
    wait_until(lambda: group_state(server, group) == "Empty", timeout=20, message=f"{group} Empty")


@pytest.fixture(scope="module")
def group(server: ServerProcess) -> str:
    """Empty group with offsets committed for partitions 0 (4) and 1 (6) of `orders`, none for 2."""
    emptied_group(server, "planner", "orders", {0: 4, 1: 6})
    assert committed(server.bootstrap, "planner", "orders") == {0: 4, 1: 6, 2: None}
    return "planner"


def reset(server: ServerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return cli("offsets", "reset", *args, "--bootstrap", server.bootstrap)


def planned(server: ServerProcess, group: str, *args: str) -> dict[tuple[str, int], int]:
    run = reset(server, group, *args, "--json")
    assert run.returncode == 0, run.stderr
    plan = json.loads(run.stdout)
    assert plan["executed"] is False
    return {(c["topic"], c["partition"]): c["new_offset"] for c in plan["changes"]}


def test_without_execute_the_plan_is_printed_and_nothing_is_committed(server, group) -> None:
    for mode in ([], ["--dry-run"]):
        run = reset(server, group, "--topic", "orders", "--to-earliest", *mode)
        assert run.returncode == 0, run.stderr
        lines = [line.split() for line in run.stdout.splitlines()]
        assert lines == [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
                         *[[group, "orders", str(p), "0"] for p in range(PARTITIONS)]]
        assert "dry run" in run.stderr and "--execute" in run.stderr
        assert "Traceback" not in run.stderr
        assert committed(server.bootstrap, group, "orders") == {0: 4, 1: 6, 2: None}


@pytest.mark.parametrize(("selector", "expected"), [
    (["--to-earliest"], {0: 0, 1: 0, 2: 0}),
    (["--to-latest"], {0: 10, 1: 10, 2: 10}),
    (["--to-offset", "7"], {0: 7, 1: 7, 2: 7}),
    (["--to-offset", "99"], {0: 10, 1: 10, 2: 10}),  # clamped to the log end
    (["--to-offset", "-3"], {0: 0, 1: 0, 2: 0}),  # clamped to the log start
    (["--to-current"], {0: 4, 1: 6, 2: 10}),  # nothing committed on 2: its log end
    (["--to-datetime", kafka_datetime(timestamp_of(3))], {0: 3, 1: 3, 2: 3}),
    (["--to-datetime", kafka_datetime(timestamp_of(3), timezone(timedelta(hours=2)))], {0: 3, 1: 3, 2: 3}),
    (["--to-datetime", kafka_datetime(timestamp_of(3) + timedelta(milliseconds=1))], {0: 4, 1: 4, 2: 4}),
    (["--to-datetime", kafka_datetime(OLD - timedelta(days=1))], {0: 0, 1: 0, 2: 0}),
    (["--by-duration", "P1D"], {0: 5, 1: 5, 2: 5}),  # the first record of the last day
    (["--by-duration", "P3DT1H"], {0: 0, 1: 0, 2: 0}),
], ids=[  # the datetimes move with the clock; an id must not (pytest-xdist's workers collect apart)
    "to-earliest", "to-latest", "to-offset 7", "to-offset 99", "to-offset -3", "to-current",
    "to-datetime of offset 3", "to-datetime of offset 3 at +02:00", "to-datetime 1 ms after offset 3",
    "to-datetime before the log", "by-duration P1D", "by-duration P3DT1H",
])
def test_each_selector_plans_kafkas_offsets(server, group, selector, expected) -> None:
    assert planned(server, group, "--topic", "orders", *selector) == {("orders", p): o for p, o in expected.items()}


def test_datetime_zones_are_read_as_kafka_reads_them(server, group) -> None:
    moment = timestamp_of(7)
    utc = moment.strftime("%Y-%m-%dT%H:%M:%S.000")
    plus_two = (moment + timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%S.000")
    for text in (utc, utc + "Z", plus_two + "+02", plus_two + "+0200", plus_two + "+02:00"):
        assert planned(server, group, "--topic", "orders:0", "--to-datetime", text) == {("orders", 0): 7}, text


def test_a_time_after_every_record_falls_back_to_the_log_end_with_a_warning(server, group) -> None:
    run = reset(server, group, "--topic", "orders:1", "--to-datetime", kafka_datetime(NOW + timedelta(days=1)))
    assert run.returncode == 0, run.stderr
    assert [line.split() for line in run.stdout.splitlines()][1:] == [[group, "orders", "1", "10"]]
    assert "orders-1 has no record at or after" in run.stderr and "latest offset 10" in run.stderr


def test_shift_by_moves_committed_offsets_within_the_log(server, group) -> None:
    assert planned(server, group, "--topic", "orders:0,1", "--shift-by", "3") == {("orders", 0): 7, ("orders", 1): 9}
    assert planned(server, group, "--topic", "orders:0,1", "--shift-by", "-5") == {("orders", 0): 0, ("orders", 1): 1}
    assert planned(server, group, "--topic", "orders:1", "--shift-by", "100") == {("orders", 1): 10}
    # Partition 2 has no committed offset: there is nothing to shift, as Kafka says.
    refused = reset(server, group, "--topic", "orders", "--shift-by", "1")
    assert refused.returncode == 1
    assert "orders-2" in refused.stderr and "no current committed offset" in refused.stderr


def test_scopes_all_topics_and_topic_partitions(server, group) -> None:
    # --all-topics: the partitions the group has committed offsets for.
    assert planned(server, group, "--all-topics", "--to-latest") == {("orders", 0): 10, ("orders", 1): 10}
    assert planned(server, group, "--topic", "orders:2", "--to-offset", "5") == {("orders", 2): 5}
    assert planned(server, group, "--topic", "orders:0,2", "--topic", "orders:1", "--to-offset", "5") == {
        ("orders", p): 5 for p in range(PARTITIONS)}
    missing = reset(server, group, "--topic", "orders:7", "--to-latest")
    assert missing.returncode == 1 and 'The partitions "orders-7" do not exist' in missing.stderr
    unknown = reset(server, group, "--topic", "no-such-topic", "--to-latest")
    assert unknown.returncode == 1 and "unknown topic" in unknown.stderr and "no-such-topic" in unknown.stderr


def test_execute_commits_the_plan_and_consumers_resume_there(server) -> None:
    emptied_group(server, "executor", "resumed", {0: 1, 1: 1, 2: 1})
    run = reset(server, "executor", "--topic", "resumed", "--to-offset", "8", "--execute")
    assert run.returncode == 0, run.stderr
    assert [line.split() for line in run.stdout.splitlines()] == [
        ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], *[["executor", "resumed", str(p), "8"] for p in range(PARTITIONS)]]
    assert "dry run" not in run.stderr
    assert committed(server.bootstrap, "executor", "resumed") == {0: 8, 1: 8, 2: 8}

    shifted = reset(server, "executor", "--all-topics", "--shift-by", "-2", "--execute", "--json")
    assert shifted.returncode == 0, shifted.stderr
    assert json.loads(shifted.stdout)["executed"] is True
    assert committed(server.bootstrap, "executor", "resumed") == {0: 6, 1: 6, 2: 6}

    member = make_member(server.bootstrap, "executor", "resumer", ["resumed"])
    try:
        poll_until([member], lambda: len(member.consumed) >= 4 * PARTITIONS, message="records after the reset")
        assert sorted((p, o) for p, o, _ in member.consumed) == [
            (p, o) for p in range(PARTITIONS) for o in range(6, RECORDS)]
    finally:
        member.close()


def test_refused_while_the_group_has_live_members(server) -> None:
    member = joined(server, "busy", "live", 2)
    try:
        member.consumer.commit(offsets=[TopicPartition("live", p, 0) for p in range(2)], asynchronous=False)
        for mode in ([], ["--execute"]):
            run = reset(server, "busy", "--topic", "live", "--to-latest", *mode)
            assert run.returncode == 1
            assert run.stdout == ""
            assert run.stderr.startswith("coordinator: error: Assignments can only be reset if the group 'busy' "
                                         "is inactive, but the current state is Stable.")
            assert committed(server.bootstrap, "busy", "live", 2) == {0: 0, 1: 0}
    finally:
        member.close()


@pytest.mark.parametrize("args", [
    ["--topic", "orders", "--to-datetime", "2026-01-01T00:00:00"],  # Kafka requires the milliseconds
    ["--topic", "orders", "--to-datetime", "2026-02-30T00:00:00.000"],
    ["--topic", "orders", "--by-duration", "1 day"],
    ["--topic", "orders", "--by-duration", "PT"],
    ["--topic", "orders:a", "--to-latest"],
    ["--topic", "orders", "--to-latest", "--dry-run", "--execute"],
    ["--topic", "orders", "--to-latest", "--to-earliest"],
    ["--topic", "orders"],
    ["--to-latest"],
])
def test_bad_arguments_are_usage_errors(args, capsys) -> None:
    # Refused while parsing, before any connection: in-process, no server needed.
    with pytest.raises(SystemExit) as exited:
        main(["offsets", "reset", "planner-args", *args, "--bootstrap", "127.0.0.1:1"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.splitlines()[-1].startswith("coordinator offsets reset: error: ")


def test_a_consumer_protocol_group_is_reset_too(server) -> None:
    member = make_member(server.bootstrap, "modern-reset", "modern", ["orders"], **{"group.protocol": "consumer"})
    try:
        poll_until([member], lambda: len(member.assignment()) == PARTITIONS, message="KIP-848 assignment")
        refused = reset(server, "modern-reset", "--topic", "orders", "--to-latest", "--execute")
        assert refused.returncode == 1 and "inactive" in refused.stderr
    finally:
        member.close()
    wait_until(lambda: group_state(server, "modern-reset") == "Empty", timeout=20, message="modern-reset Empty")
    run = reset(server, "modern-reset", "--topic", "orders", "--by-duration", "P1D", "--execute")
    assert run.returncode == 0, run.stderr
    assert committed(server.bootstrap, "modern-reset", "orders") == {0: 5, 1: 5, 2: 5}


def test_by_duration_counts_back_from_now(server, group) -> None:
    # The newest record is 51 s old when produced: 30 s back from now finds nothing after it, and
    # falls back to the log end.
    assert planned(server, group, "--topic", "orders:0", "--by-duration", "PT30S") == {("orders", 0): 10}
