"""Per-group configs with Kafka 4.0's own tool: `kafka-configs.sh --entity-type groups` sets, shows
and deletes a group's configs on the coordinator (the server process), a bad value fails the tool
with Kafka's message, and the overrides survive a SIGKILL of the coordinator."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support.kafka import require_kafka_home
from tests.support.server import running_server


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
