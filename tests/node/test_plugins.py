"""A group type that exists only in tests/ plugs into a node through `coordinator.plugins` (issue 26,
point 6): `tests.core.toy.plugin` offers the toy type's one registration and its one API declaration
(ToyJoin, a private key), and no file outside tests/ names it. The node then serves it over a real
socket, writes it to the log, replays it after a restart and on a standby that takes over, lists its
groups by their own type, authorizes it by its declared rule, and, with `coordinator.shards=2` under
the supervisor, serves a group on its own shard and answers NOT_COORDINATOR on the other. The toy
type's one setting (`toy.session.timeout.ms`, declared in `tests/core/toy/settings.py`) is accepted
from the config file, the environment and `--override` once the plug-in is named, reaches the type,
and a bad value stops start-up in one line."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from coordinator.config import resolve
from coordinator.node.server import CoordinatorServer
from coordinator.runtime.startup_checks import StartupError
from protocol.build import build
from protocol.errors import ErrorCode
from protocol.schemas import request_schema
from tests.core.toy.plugin import TOY_JOIN
from tests.core.toy.settings import ToySettings
from tests.runtime.conftest import make_config
from tests.runtime.test_startup import assert_one_line_exit_2, local, run_serve
from tests.security.conftest import connect, security_config
from tests.security.support import add_user, sasl_login
from tests.shards.supervised import Supervised, group_on_shard
from tests.support.polling import eventually
from tests.support.server import ServerProcess, wait_until
from tests.support.wire import WireClient, call

PLUGIN = {"coordinator.plugins": "tests.core.toy.plugin"}
LIST_GROUPS, API_VERSIONS, CREATE_ACLS = 16, 18, 30


def toy_join(group_id: str, member_id: str) -> Any:
    return build(request_schema(TOY_JOIN, 0), {"group_id": group_id, "member_id": member_id})


async def joined(port: int, group_id: str, member_id: str) -> tuple[int, int, list[str]]:
    response = await call(port, toy_join(group_id, member_id))
    return response.error_code, response.epoch, list(response.members)


async def listed(port: int) -> dict[str, tuple[str, str, str]]:
    response = await call(port, build(request_schema(LIST_GROUPS, 5), {"states_filter": [], "types_filter": []}))
    assert response.error_code == ErrorCode.NONE
    return {g.group_id: (g.protocol_type, g.group_state, g.group_type) for g in response.groups}


@pytest.mark.asyncio
async def test_the_plugin_is_served_over_a_socket_listed_by_its_type_and_replayed_after_a_restart(
        tmp_path: Path) -> None:
    config = make_config(tmp_path, **PLUGIN)
    server = CoordinatorServer(config)
    await server.start()
    try:
        assert await joined(server.port, "t1", "a") == (ErrorCode.NONE, 1, ["a"])
        assert await joined(server.port, "t1", "a") == (ErrorCode.NONE, 1, ["a"])  # already a member
        assert (await listed(server.port))["t1"] == ("toy", "Stable", "toy")
        toy_only = await call(server.port, build(request_schema(LIST_GROUPS, 5),
                                                 {"states_filter": [], "types_filter": ["toy"]}))
        assert [g.group_id for g in toy_only.groups] == ["t1"]
        versions = await call(server.port, build(request_schema(API_VERSIONS, 3), {
            "client_software_name": "test", "client_software_version": "1"}))
        advertised = {k.api_key for k in versions.api_keys}
        assert TOY_JOIN not in advertised and 11 in advertised  # served, never advertised
        assert await joined(server.port, "", "a") == (ErrorCode.INVALID_REQUEST, -1, [])
    finally:
        await server.stop()

    again = CoordinatorServer(config)  # the same log, read back from disk
    await again.start()
    try:
        assert (await listed(again.port))["t1"] == ("toy", "Stable", "toy")
        assert await joined(again.port, "t1", "b") == (ErrorCode.NONE, 2, ["a", "b"])
    finally:
        await again.stop()


def test_a_standby_loads_the_plugin_replays_its_groups_and_serves_them_on_takeover(tmp_path: Path) -> None:
    data = tmp_path / "data"
    active = ServerProcess(data, overrides=PLUGIN).start()
    standby = ServerProcess(data, overrides=PLUGIN, port=active.port)
    standby.log_path = tmp_path / "standby.log"
    try:
        assert asyncio.run(joined(active.port, "t1", "a")) == (ErrorCode.NONE, 1, ["a"])
        standby.start(wait=False)
        wait_until(lambda: "standby_waiting" in standby.log(), timeout=30, message="the standby to be tailing")
        assert asyncio.run(joined(active.port, "t1", "b")) == (ErrorCode.NONE, 2, ["a", "b"])  # while it tails
        active.stop()
        wait_until(standby.ready, timeout=30, message="the standby's takeover")
        assert asyncio.run(listed(standby.port))["t1"] == ("toy", "Stable", "toy")
        assert asyncio.run(joined(standby.port, "t1", "c")) == (ErrorCode.NONE, 3, ["a", "b", "c"])
        assert "Traceback" not in standby.log()
    finally:
        standby.stop()
        active.stop()


@pytest.mark.asyncio
async def test_the_plugin_api_is_authorized_by_its_declared_rule(tmp_path: Path) -> None:
    listeners = "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"
    server = CoordinatorServer(security_config(tmp_path, listeners, **PLUGIN, **{
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512", "super.users": "User:ANONYMOUS"}))
    await server.start()
    clients: list[WireClient] = []
    try:
        admin = await connect(server.ports["PLAINTEXT"])
        clients.append(admin)
        for user in ("alice", "bob"):
            await add_user(admin, user, f"{user}-pw")
        read_t1 = {"resource_type": 3, "resource_name": "t1", "resource_pattern_type": 3,
                   "principal": "User:alice", "host": "*", "operation": 3, "permission_type": 3}
        created = await admin.request(build(request_schema(CREATE_ACLS, 3), {"creations": [read_t1]}))
        assert [r.error_code for r in created.results] == [ErrorCode.NONE]

        async def as_user(user: str, group_id: str) -> tuple[int, int, list[str]]:
            client = await connect(server.ports["SASL_PLAINTEXT"], client_id=f"{user}-client")
            clients.append(client)
            assert (await sasl_login(client, "SCRAM-SHA-512", user, f"{user}-pw")).error_code == 0
            response = await client.request(toy_join(group_id, user))
            return response.error_code, response.epoch, list(response.members)

        assert await as_user("alice", "t1") == (ErrorCode.NONE, 1, ["alice"])
        assert await as_user("bob", "t1") == (ErrorCode.GROUP_AUTHORIZATION_FAILED, -1, [])
        assert await as_user("alice", "t2") == (ErrorCode.GROUP_AUTHORIZATION_FAILED, -1, [])
        assert await joined(server.ports["PLAINTEXT"], "t1", "root") == (ErrorCode.NONE, 2, ["alice", "root"])
    finally:
        for client in clients:
            await client.close()
        await server.stop()


def test_two_shards_under_the_supervisor_serve_a_toy_group_on_its_own_shard(tmp_path: Path) -> None:
    server = Supervised(tmp_path / "data", overrides=PLUGIN)
    try:
        server.start()  # inside: a start that times out still stops the supervisor and its shards
        for shard in (0, 1):
            group = group_on_shard(shard, 2, "toy")
            other = 1 - shard
            assert asyncio.run(joined(server.shard_port(other), group, "m")) == (ErrorCode.NOT_COORDINATOR, -1, [])
            assert asyncio.run(joined(server.shard_port(shard), group, "m")) == (ErrorCode.NONE, 1, ["m"])
            assert asyncio.run(listed(server.shard_port(shard)))[group] == ("toy", "Stable", "toy")
            assert group not in asyncio.run(listed(server.shard_port(other)))
    finally:
        server.stop()


@pytest.mark.parametrize(("module", "says"), [
    ("tests.core.toy.no_such_module", "coordinator.plugins: cannot import tests.core.toy.no_such_module: "
                                      "ModuleNotFoundError"),
    ("tests.core.toy", "coordinator.plugins: module tests.core.toy has neither register(ctx) nor declarations"),
])
def test_a_plugin_that_offers_nothing_stops_start_up_in_one_line(tmp_path: Path, module: str, says: str) -> None:
    config = resolve(environ={}, overrides=[f"coordinator.plugins={module}"],
                     flags={"listeners": "127.0.0.1:0", "metrics.listen": "", "log.dirs": str(tmp_path / "d")})
    with pytest.raises(StartupError) as refused:
        CoordinatorServer(config)
    assert str(refused.value).startswith(says)
    assert "\n" not in str(refused.value)


@pytest.mark.asyncio
async def test_the_plugins_setting_reaches_its_type_a_short_session_empties_the_group_over_a_socket(
        tmp_path: Path) -> None:
    default = ToySettings().toy_session_timeout_ms
    config = make_config(tmp_path, **PLUGIN, **{"toy.session.timeout.ms": "200"})
    assert config["toy.session.timeout.ms"] == 200 and config.source("toy.session.timeout.ms") == "--override"
    server = CoordinatorServer(config)
    await server.start()
    try:
        assert await joined(server.port, "t1", "a") == (ErrorCode.NONE, 1, ["a"])
        # Emptied by the toy's session timer long before the default session (10 s) could end:
        # the setting, not the default, armed it.
        async def emptied() -> bool:
            return (await listed(server.port))["t1"][1] == "Empty"

        await eventually(emptied, timeout=default / 1000 / 2, message="the toy session to empty t1")
        assert await joined(server.port, "t1", "b") == (ErrorCode.NONE, 3, ["b"])  # a left, b joined
    finally:
        await server.stop()


def test_the_plugins_setting_is_read_from_the_config_file_and_the_environment(tmp_path: Path) -> None:
    properties = tmp_path / "node.properties"
    properties.write_text("coordinator.plugins=tests.core.toy.plugin\ntoy.session.timeout.ms=1500\n")
    from_file = resolve(config_file=properties, environ={})
    assert from_file["toy.session.timeout.ms"] == 1500
    assert from_file.build(ToySettings) == ToySettings(1500)
    from_env = resolve(config_file=properties, environ={"COORDINATOR_TOY_SESSION_TIMEOUT_MS": "2500"})
    assert from_env.build(ToySettings) == ToySettings(2500)  # the environment over the file, as for any key
    assert resolve(environ={}, overrides=["coordinator.plugins=tests.core.toy.plugin"]).build(ToySettings) \
        == ToySettings()


@pytest.mark.parametrize(("args", "says"), [
    (["toy.session.timeout.ms=0"], ("toy.session.timeout.ms", "'0'", "must be between 1 and 2147483647")),
    (["toy.session.timeout.ms=soon"], ("toy.session.timeout.ms", "'soon'", "--override")),
    ([], ("unknown configuration key", "toy.session.timeout.ms")),  # the plug-in not named: no such key
])
def test_a_bad_value_of_the_plugins_setting_stops_start_up_in_one_line(
        tmp_path: Path, args: list[str], says: tuple[str, ...]) -> None:
    plugin = [f"coordinator.plugins={m}" for m in PLUGIN.values()] if args else []
    overrides = [*plugin, *(args or ["toy.session.timeout.ms=500"])]
    result = run_serve(*local(tmp_path), *(arg for item in overrides for arg in ("--override", item)))
    assert_one_line_exit_2(result, *says)


def test_a_setting_of_a_plugin_that_cannot_be_imported_names_the_import_failure(tmp_path: Path) -> None:
    result = run_serve(*local(tmp_path), "--override", "coordinator.plugins=tests.core.toy.no_such_module",
                       "--override", "toy.session.timeout.ms=500")
    assert_one_line_exit_2(result, "coordinator.plugins", "cannot import tests.core.toy.no_such_module",
                           "ModuleNotFoundError")


def test_a_plugin_whose_group_type_is_not_a_declaration_stops_start_up_in_one_line(tmp_path: Path) -> None:
    config = make_config(tmp_path, **{"coordinator.plugins": "tests.node.mislabelled_plugin"})
    with pytest.raises(StartupError) as refused:
        CoordinatorServer(config)
    assert str(refused.value) == ("coordinator.plugins: tests.node.mislabelled_plugin.GROUP_TYPE is not a "
                                  "GroupTypeDeclaration")
