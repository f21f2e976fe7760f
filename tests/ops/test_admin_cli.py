"""The admin CLI against the real server process with real confluent-kafka groups: list, describe
(members, decoded assignments, committed offsets, end offsets, lag), delete, and offsets reset,
which is refused while the group has members, as Kafka's kafka-consumer-groups refuses it."""

from __future__ import annotations

import asyncio
import json
import re

import pytest
from confluent_kafka import TopicPartition

from coordinator.admin import client as admin_client
from coordinator.admin import groups
from coordinator.admin.client import AdminClient
from tests.support.clients import Member, make_member, poll_until, produce
from tests.support.server import free_port, wait_until

pytestmark = pytest.mark.interop


def joined(server, group: str, topic: str, partitions: int) -> Member:
    member = make_member(server.bootstrap, group, f"{group}-client", [topic])
    poll_until([member], lambda: len(member.assignment()) == partitions, message=f"{group} assignment")
    return member


def commit(member: Member, topic: str, offsets: dict[int, int]) -> None:
    member.consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)


def listed(cli, group: str) -> dict | None:
    return next((g for g in cli("groups", "list", "--json").json() if g["group_id"] == group), None)


def wait_for_state(cli, group: str, state: str) -> None:
    wait_until(lambda: (listed(cli, group) or {}).get("state") == state, timeout=20, message=f"{group} {state}")


def committed(cli, group: str) -> dict[int, int | None]:
    return {o["partition"]: o["committed_offset"] for o in cli("groups", "describe", group, "--json").json()["offsets"]}


def test_list_shows_each_group_with_type_and_state(server, cli) -> None:
    member = joined(server, "ops-list", "listed", 1)
    try:
        entry = listed(cli, "ops-list")
        assert entry == {"group_id": "ops-list", "group_type": "classic", "state": "Stable", "protocol_type": "consumer"}
        table = cli("groups", "list")
        assert table.code == 0
        assert table.out.splitlines()[0].split() == ["GROUP", "TYPE", "STATE", "PROTOCOL-TYPE"]
        assert ["ops-list", "classic", "Stable", "consumer"] in [line.split() for line in table.out.splitlines()]
    finally:
        member.close()
    wait_for_state(cli, "ops-list", "Empty")


def test_describe_shows_members_assignment_committed_offsets_and_lag(server, cli) -> None:
    produce(server.bootstrap, "described", 30, 3)  # 10 records per partition
    member = joined(server, "ops-describe", "described", 3)
    try:
        commit(member, "described", {0: 4, 1: 5, 2: 6})
        description = cli("groups", "describe", "ops-describe", "--json").json()
        assert (description["group_type"], description["state"], description["protocol_type"]) == (
            "classic", "Stable", "consumer")
        assert description["protocol"] == "range"
        assert description["coordinator"] == server.bootstrap
        [described_member] = description["members"]
        assert described_member["client_id"] == "ops-describe-client"
        assert described_member["assignment"] == {"described": [0, 1, 2]}
        assert described_member["subscribed_topics"] == ["described"]
        member_id = described_member["member_id"]
        assert [(o["partition"], o["committed_offset"], o["end_offset"], o["lag"], o["member_id"])
                for o in description["offsets"]] == [
            (0, 4, 10, 6, member_id), (1, 5, 10, 5, member_id), (2, 6, 10, 4, member_id)]

        table = cli("groups", "describe", "ops-describe")
        assert table.code == 0
        assert re.search(rf"^{re.escape(member_id)}\s+-\s+ops-describe-client\s+\S+\s+\S+\s+described:0,1,2$",
                         table.out, re.M), table.out
        rows = [line.split() for line in table.out.splitlines() if line.startswith("described ")]
        assert rows == [["described", str(p), str(c), "10", str(10 - c), member_id] for p, c in ((0, 4), (1, 5), (2, 6))]
    finally:
        member.close()


def test_describe_of_an_unknown_group_fails(cli) -> None:
    run = cli("groups", "describe", "ops-never-existed")
    assert run.code == 1
    assert "does not exist" in run.err


def test_reset_is_refused_while_members_are_active_and_applied_once_empty(server, cli) -> None:
    produce(server.bootstrap, "reset", 30, 3)
    member = joined(server, "ops-reset", "reset", 3)
    try:
        commit(member, "reset", {0: 7, 1: 7, 2: 7})
        refused = cli("offsets", "reset", "ops-reset", "--topic", "reset", "--to-earliest")
        assert refused.code == 1
        assert "inactive" in refused.err and "Stable" in refused.err
        assert committed(cli, "ops-reset") == {0: 7, 1: 7, 2: 7}
    finally:
        member.close()
    wait_for_state(cli, "ops-reset", "Empty")

    dry = cli("offsets", "reset", "ops-reset", "--topic", "reset", "--to-earliest", "--dry-run", "--json").json()
    assert dry["executed"] is False
    assert [(c["partition"], c["previous_offset"], c["new_offset"]) for c in dry["changes"]] == [
        (0, 7, 0), (1, 7, 0), (2, 7, 0)]
    assert committed(cli, "ops-reset") == {0: 7, 1: 7, 2: 7}

    earliest = cli("offsets", "reset", "ops-reset", "--topic", "reset", "--to-earliest", "--json").json()
    assert earliest["executed"] is True and earliest["state"] == "Empty"
    assert committed(cli, "ops-reset") == {0: 0, 1: 0, 2: 0}

    latest = cli("offsets", "reset", "ops-reset", "--topic", "reset", "--to-latest")
    assert latest.code == 0
    assert latest.out.splitlines()[0].split() == ["GROUP", "TOPIC", "PARTITION", "PREVIOUS-OFFSET", "NEW-OFFSET"]
    assert [line.split() for line in latest.out.splitlines()[1:]] == [
        ["ops-reset", "reset", str(p), "0", "10"] for p in range(3)]
    assert committed(cli, "ops-reset") == {0: 10, 1: 10, 2: 10}

    cli("offsets", "reset", "ops-reset", "--topic", "reset", "--to-offset", "3", "--json").json()
    assert committed(cli, "ops-reset") == {0: 3, 1: 3, 2: 3}
    clamped = cli("offsets", "reset", "ops-reset", "--topic", "reset", "--to-offset", "99", "--json").json()
    assert [c["new_offset"] for c in clamped["changes"]] == [10, 10, 10]

    # The group's consumers resume from the reset offsets.
    cli("offsets", "reset", "ops-reset", "--topic", "reset", "--to-offset", "8", "--json").json()
    resumed = make_member(server.bootstrap, "ops-reset", "resumed", ["reset"])
    try:
        poll_until([resumed], lambda: len(resumed.consumed) >= 6, message="records after the reset offsets")
        assert sorted((p, o) for p, o, _ in resumed.consumed) == [(p, o) for p in range(3) for o in (8, 9)]
    finally:
        resumed.close()


def test_reset_of_an_unknown_topic_is_an_error(cli) -> None:
    run = cli("offsets", "reset", "ops-reset-unknown", "--topic", "no-such-topic", "--to-latest")
    assert run.code == 1
    assert "unknown topic" in run.err and "no-such-topic" in run.err


def test_delete_is_refused_for_a_live_group_and_removes_an_empty_one(server, cli) -> None:
    member = joined(server, "ops-delete", "deleted", 2)
    try:
        commit(member, "deleted", {0: 0, 1: 0})
        refused = cli("groups", "delete", "ops-delete")
        assert refused.code == 1
        assert "NON_EMPTY_GROUP" in refused.err
    finally:
        member.close()
    wait_for_state(cli, "ops-delete", "Empty")
    deleted = cli("groups", "delete", "ops-delete", "--json").json()
    assert deleted == {"group_id": "ops-delete", "deleted": True}
    assert listed(cli, "ops-delete") is None
    assert cli("groups", "describe", "ops-delete").code == 1
    again = cli("groups", "delete", "ops-delete")
    assert again.code == 1 and "GROUP_ID_NOT_FOUND" in again.err


def test_list_falls_back_to_older_list_groups_versions(server, cli, monkeypatch) -> None:
    member = joined(server, "ops-fallback", "fallback", 1)
    try:
        monkeypatch.setitem(admin_client.CLIENT_VERSIONS, admin_client.LIST_GROUPS, (0, 3))
        entry = listed(cli, "ops-fallback")
        # v3 has neither type nor state: brokers without v5 only have classic groups.
        assert entry == {"group_id": "ops-fallback", "group_type": "classic", "state": "", "protocol_type": "consumer"}
        monkeypatch.setitem(admin_client.CLIENT_VERSIONS, admin_client.LIST_GROUPS, (4, 4))
        assert listed(cli, "ops-fallback")["state"] == "Stable"
    finally:
        member.close()


def test_negotiation_uses_the_highest_common_version_and_names_missing_apis(server) -> None:
    async def check() -> None:
        async with AdminClient(server.bootstrap, timeout=5) as client:
            connection = await client.bootstrap()
            assert connection.version(admin_client.LIST_GROUPS) == 5
            assert connection.version(admin_client.OFFSET_FETCH) == 9  # server 0–9, client 2–9
            if not connection.supports(admin_client.CONSUMER_GROUP_DESCRIBE):
                with pytest.raises(admin_client.AdminError, match="ConsumerGroupDescribe"):
                    connection.version(admin_client.CONSUMER_GROUP_DESCRIBE)
            # Describing a classic group works whether or not API 69 is served.
            description = await groups.describe_group(client, "ops-nobody")
            assert description.state == "Dead" and description.members == []

    asyncio.run(check())


def test_an_unreachable_bootstrap_is_a_clear_error(cli) -> None:
    run = cli("groups", "list", bootstrap=f"127.0.0.1:{free_port()}")
    assert run.code == 1
    assert run.err.startswith("coordinator: error: no bootstrap server reachable")
    assert "cannot connect" in run.err


def test_the_bootstrap_defaults_to_the_admin_environment_variable(server, monkeypatch, capsys) -> None:
    from coordinator.cli import main

    monkeypatch.setenv("COORDINATOR_ADMIN_BOOTSTRAP", server.bootstrap)
    capsys.readouterr()
    assert main(["groups", "list", "--json"]) == 0
    assert isinstance(json.loads(capsys.readouterr().out), list)
