"""The command line as an operator uses it: configuration errors, --help, signals."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from confluent_kafka.admin import AdminClient

from coordinator.config import KEYS, ConfigError, resolve
from tests.support.metrics import scrape
from tests.support.server import ServerProcess, http_get


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "coordinator", *args], capture_output=True, text=True, timeout=60, env=env)


def test_help_lists_every_key_with_its_default() -> None:
    result = run_cli("serve", "--help")
    assert result.returncode == 0
    for key in KEYS.values():
        assert key.name in result.stdout
    assert "group.consumer.session.timeout.ms" in result.stdout and "45000" in result.stdout


@pytest.mark.parametrize(
    ("args", "key"),
    [
        (["--override", "no.such.key=1"], "no.such.key"),
        (["--override", "group.max.size=lots"], "group.max.size"),
        (["--override", "num.partitions=0"], "num.partitions"),
        (["--listen", "nowhere"], "listeners"),
        (["--override", "log.flush.policy=sometimes"], "log.flush.policy"),
    ],
)
def test_bad_configuration_exits_2_naming_the_key(args: list[str], key: str, tmp_path) -> None:
    result = run_cli("serve", "--data-dir", str(tmp_path), *args)
    assert result.returncode == 2
    assert key in result.stderr


@pytest.mark.parametrize(("env", "args", "line"), [
    # README's example once: Kafka refuses it too (below group.consumer.min.session.timeout.ms).
    ({"COORDINATOR_GROUP_CONSUMER_SESSION_TIMEOUT_MS": "30000"}, [],
     "group.consumer.session.timeout.ms: invalid value 30000 (environment COORDINATOR_GROUP_CONSUMER_SESSION_TIMEOUT_MS):"
     " must be between 45000 and 60000 (group.consumer.min.session.timeout.ms and"
     " group.consumer.max.session.timeout.ms)"),
    ({}, ["--override", "group.consumer.max.heartbeat.interval.ms=60000",
          "--override", "group.consumer.heartbeat.interval.ms=45000"],
     "group.consumer.heartbeat.interval.ms: invalid value 45000 (--override): must be between 5000 and 44999"
     " (lower than group.consumer.session.timeout.ms, 45000)"),
    ({}, ["--override", "group.min.session.timeout.ms=2000000"],
     "group.min.session.timeout.ms: invalid value 2000000 (--override): must be at most group.max.session.timeout.ms"
     " (1800000)"),
    ({}, ["--override", "group.max.size=3000000000"],
     "group.max.size: invalid value '3000000000' (--override): must be between 1 and 2147483647"),
    ({}, ["--override", "sidecar.listener.base.port=70000"],
     "sidecar.listener.base.port: invalid value '70000' (--override): must be between 1 and 65535"),
    ({}, ["--override", "sidecar.listener.advertised.host=0.0.0.0"],
     "sidecar.listener.advertised.host: invalid value '0.0.0.0' (--override): 0.0.0.0 is not an address clients"
     " can connect to"),
    ({}, ["--override", "num.partitions=many"], "num.partitions: invalid value 'many' (--override): expected an integer"),
    ({}, ["--override", "topics=orders:3,bad/name:1"],
     "topics: invalid value 'orders:3,bad/name:1' (--override): Topic name \"bad/name\" is illegal, it contains a"
     " character other than ASCII alphanumerics, '.', '_' and '-'"),
    ({}, ["--override", "topics=orders:0"],
     "topics: invalid value 'orders:0' (--override): topic orders must have between 1 and 2147483647 partitions"),
])
def test_a_value_out_of_range_is_one_line_naming_the_allowed_range(env, args, line, tmp_path) -> None:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("COORDINATOR_")}
    result = run_cli("serve", "--data-dir", str(tmp_path), *args, env={**environ, **env})
    assert result.returncode == 2
    assert result.stderr.splitlines() == [f"coordinator: configuration error: {line}"]


def test_unknown_key_in_config_file_exits_2(tmp_path) -> None:
    config = tmp_path / "server.properties"
    config.write_text("# comment\nnum.partitions=3\nbogus.key=1\n")
    result = run_cli("serve", "--config", str(config), "--data-dir", str(tmp_path))
    assert result.returncode == 2 and "bogus.key" in result.stderr


def test_precedence_default_file_env_override_flag(tmp_path) -> None:
    config = tmp_path / "server.properties"
    config.write_text("num.partitions=3\ngroup.max.size=10\nnode.id=4\n")
    resolved = resolve(config_file=config, environ={"COORDINATOR_GROUP_MAX_SIZE": "20", "COORDINATOR_NODE_ID": "5"},
                       overrides=["node.id=6"], flags={"listeners": "127.0.0.1:1234"})
    assert resolved["num.partitions"] == 3
    assert resolved["group.max.size"] == 20
    assert resolved["node.id"] == 6
    assert resolved.listen == ("127.0.0.1", 1234)
    assert resolved["offsets.retention.minutes"] == 10080
    with pytest.raises(ConfigError) as error:
        resolve(environ={"COORDINATOR_GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS": "50000"})
    assert error.value.key == "group.consumer.heartbeat.interval.ms"


def test_sigterm_drains_and_exits_zero(tmp_path) -> None:
    server = ServerProcess(tmp_path / "data").start()
    try:
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        assert admin.list_topics(timeout=10).topics == {}
        assert http_get(server.metrics_port, "/healthz")[0] == 200
        assert server.terminate() == 0
        events = [json.loads(line)["event"] for line in server.log().splitlines() if line.startswith("{")]
        assert events.index("shutdown_requested") < events.index("server_stopped")
    finally:
        server.stop()


def test_sigterm_closes_client_connections_and_exits_zero(tmp_path) -> None:
    """An open client connection is closed by the server on SIGTERM and the process exits 0."""
    import asyncio

    from kio.schema.api_versions.v0.request import ApiVersionsRequest

    from tests.support.wire import WireClient

    server = ServerProcess(tmp_path / "data").start()
    outcome: dict[str, object] = {}

    async def client() -> None:
        wire = await WireClient.connect(server.port)
        assert (await wire.request(ApiVersionsRequest())).error_code == 0
        outcome["rc"], outcome["closed"] = await asyncio.gather(
            asyncio.to_thread(server.terminate), wire.closed_by_peer(timeout=15))
        await wire.close()

    try:
        asyncio.run(client())
        assert outcome["closed"] is True
        assert outcome["rc"] == 0
    finally:
        server.stop()


def test_sigterm_answers_a_parked_join_then_exits_zero(tmp_path) -> None:
    """A JoinGroup parked by the initial rebalance delay is answered (NOT_COORDINATOR) on SIGTERM,
    then its connection closes and the process exits 0 well before the delay would have ended."""
    import asyncio
    from datetime import timedelta

    from kio.schema.join_group.v5.request import JoinGroupRequest, JoinGroupRequestProtocol

    from tests.support.wire import WireClient

    server = ServerProcess(tmp_path / "data", overrides={"group.initial.rebalance.delay.ms": "120000"}).start()

    async def client() -> tuple[int, bool]:
        wire = await WireClient.connect(server.port)
        join = JoinGroupRequest(group_id="parked", session_timeout=timedelta(seconds=30), rebalance_timeout=timedelta(minutes=5),
                                member_id="", group_instance_id="static-1", protocol_type="consumer",
                                protocols=(JoinGroupRequestProtocol(name="range", metadata=b""),))
        correlation_id = await wire.send(join)
        # The join is parked (no answer) until we signal the server.
        pending = asyncio.ensure_future(wire.receive(11, 5, timeout=30))
        done, _ = await asyncio.wait({pending}, timeout=0.5)
        assert not done, "the join should be parked by the initial rebalance delay"
        await asyncio.to_thread(server.proc.send_signal, 15)
        got, response = await pending
        assert got == correlation_id
        closed = await wire.closed_by_peer(timeout=15)
        await wire.close()
        return response.error_code, closed

    try:
        error_code, closed = asyncio.run(client())
        assert error_code == 16  # NOT_COORDINATOR
        assert closed
        assert server.proc is not None and server.proc.wait(15) == 0
    finally:
        server.stop()


def test_a_serving_process_freezes_its_loaded_heap_for_the_collector(tmp_path) -> None:
    server = ServerProcess(tmp_path / "data").start()
    try:
        assert scrape(server.metrics_port)["coordinator_gc_frozen_objects"] > 10_000
    finally:
        server.stop()
