"""The admin CLI against the real server process with real confluent-kafka groups: list, describe
(members, decoded assignments, committed offsets, end offsets, lag) and delete. Offsets resets are
proven in test_admin_cli_reset.py."""

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
            assert connection.version(admin_client.OFFSET_FETCH) == 9  # server 0–10, client 2–9
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
