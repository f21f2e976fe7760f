"""Per-group configs with real clients: Kafka 4.0's own tool (`kafka-configs.sh --entity-type
groups`) sets, shows and deletes a group's configs on the coordinator (the server process), a bad
value fails the tool with Kafka's message, and the overrides survive a SIGKILL of the coordinator;
the Java Admin client (4.3.0) sets and describes them; a share group's own lock duration decides
when a SIGKILLed share consumer's records come back."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from confluent_kafka import ShareConsumer

from tests.support.clients import produce
from tests.support.java import classpath, compile_java, require_streams_clients
from tests.support.kafka import require_kafka_home
from tests.support.server import running_server
from tests.support.wire import WireClient, request


def configs_tool(home: Path, bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(home / "bin" / "kafka-configs.sh"), "--bootstrap-server", bootstrap,
                           "--entity-type", "groups", *args], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "KAFKA_HEAP_OPTS": "-Xmx128M"})


@pytest.mark.slow  # five JVM starts of the tool: 30-50 s on two shared cores
def test_kafka_configs_sets_describes_and_deletes_group_configs_that_survive_a_kill(tmp_path: Path) -> None:
    home = require_kafka_home()
    with running_server(tmp_path) as server:
        done = configs_tool(home, server.bootstrap, "--entity-name", "orders", "--alter", "--add-config",
                            "consumer.heartbeat.interval.ms=6000,share.record.lock.duration.ms=20000,"
                            "streams.num.standby.replicas=1")
        assert done.returncode == 0, done.stderr
        assert "Completed updating config for group orders." in done.stdout

        refused = configs_tool(home, server.bootstrap, "--entity-name", "orders", "--alter", "--add-config",
                               "consumer.heartbeat.interval.ms=100")
        assert refused.returncode != 0
        assert ("InvalidConfigurationException: consumer.heartbeat.interval.ms must be greater than or equal "
                "to group.consumer.min.heartbeat.interval.ms") in refused.stderr + refused.stdout

        server.kill()  # SIGKILL: the overrides were records in the log before the tool was answered
        server.start()
        deleted = configs_tool(home, server.bootstrap, "--entity-name", "orders", "--alter", "--delete-config",
                               "streams.num.standby.replicas")
        assert deleted.returncode == 0, deleted.stderr
        shown = configs_tool(home, server.bootstrap, "--entity-name", "orders", "--describe")
        assert shown.returncode == 0, shown.stderr
        shown_lines = [line.strip() for line in shown.stdout.splitlines()]
        lines = sorted(line.split(" ")[0] for line in shown_lines if "=" in line.split(" ")[0])
        assert lines == ["consumer.heartbeat.interval.ms=6000", "share.record.lock.duration.ms=20000"]
        assert ("synonyms={DYNAMIC_GROUP_CONFIG:consumer.heartbeat.interval.ms=6000, "
                "DEFAULT_CONFIG:group.consumer.heartbeat.interval.ms=5000}") in shown.stdout


HOLDER = textwrap.dedent("""
    import json, sys
    from confluent_kafka import ShareConsumer
    consumer = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": "jobs-workers",
                              "share.acknowledgement.mode": "explicit"})
    consumer.subscribe(["jobs"])
    held = []
    while not held:
        held = [m.offset() for m in consumer.poll(0.5) if m.error() is None]
    print(json.dumps(held), flush=True)
    sys.stdin.read()  # hold them (unacknowledged) until killed
""")


async def set_group_configs(port: int, group: str, **values: str) -> list[int]:
    client = await WireClient.connect(port)
    try:
        response = await client.request(request(44, 1, validate_only=False, resources=[
            {"resource_type": 32, "resource_name": group, "configs": [
                {"name": name.replace("_", "."), "config_operation": 0, "value": value}
                for name, value in values.items()]}]))
        return [r.error_code for r in response.responses]
    finally:
        await client.close()


def test_a_share_groups_own_lock_duration_brings_a_killed_consumers_records_back(tmp_path: Path) -> None:
    # The broker-wide lock is Kafka's 30 s and the session 45 s: only the group's 2 s lock can bring
    # the records back within the test's bound. One partition: the simple assignor shares it with
    # the second consumer at once, while the killed one is still a member.
    with running_server(tmp_path, overrides={"topics": "jobs:1",
                                             "group.share.min.record.lock.duration.ms": "1000"}) as server:
        assert asyncio.run(set_group_configs(server.port, "jobs-workers", share_record_lock_duration_ms="2000",
                                             share_auto_offset_reset="earliest")) == [0]
        produce(server.bootstrap, "jobs", 50, 1)
        with subprocess.Popen([sys.executable, "-c", HOLDER, server.bootstrap], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True) as holder:
            try:
                assert holder.stdout is not None
                held = set(json.loads(holder.stdout.readline()))
                assert held
                # SIGSTOP, not SIGKILL: a closed connection gives its records back at once (the share
                # session cache); a frozen consumer keeps it open, so only the lock can.
                holder.send_signal(signal.SIGSTOP)
                killed_at = time.monotonic()
                other = ShareConsumer({"bootstrap.servers": server.bootstrap, "group.id": "jobs-workers"})
                other.subscribe(["jobs"])
                seen: set[int] = set()
                try:
                    while not held <= seen and time.monotonic() - killed_at < 20:
                        seen |= {m.offset() for m in other.poll(0.5) if m.error() is None}
                finally:
                    other.close()
            finally:
                holder.kill()
                holder.wait(10)
        came_back = time.monotonic() - killed_at
        assert held <= seen, f"held {sorted(held)} not delivered again within 20 s (seen {len(seen)})"
        assert 1.0 <= came_back < 20  # the group's 2 s lock (less the poll), not the broker's 30 s


def test_the_java_admin_client_sets_describes_and_is_refused_group_configs(tmp_path: Path) -> None:
    jars = require_streams_clients()  # the Kafka 4.3.0 clients
    classes = compile_java(Path(__file__).parent / "java" / "GroupConfigsAdmin.java", jars, tmp_path / "classes")
    with running_server(tmp_path) as server:
        done = subprocess.run(["java", "-cp", f"{classpath(jars)}:{classes}", "GroupConfigsAdmin", server.bootstrap,
                               "payments"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "altered"
    assert lines[1] == ("refused=InvalidConfigurationException: streams.num.standby.replicas must be less than or "
                        "equal to group.streams.max.standby.replicas")
    entries = dict(line.removeprefix("entry=").rsplit(" ", 1) for line in lines[2:])
    assert entries["streams.num.standby.replicas=1"] == "DYNAMIC_GROUP_CONFIG"
    assert entries["consumer.session.timeout.ms=50000"] == "DYNAMIC_GROUP_CONFIG"
    assert entries["consumer.heartbeat.interval.ms=5000"] == "DEFAULT_CONFIG"
    assert len(entries) == 12
