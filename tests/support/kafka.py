"""A real Apache Kafka 4.0 broker for tests: single-node KRaft on 127.0.0.1, free ports, a
temporary directory, stopped by its process id.

The distribution comes from `KAFKA_HOME` (`.ci/run` sets it when `../shared/kafka` exists); without
it, `require_kafka_home()` skips the test with the reason. Starting a broker costs a JVM format and
start (5-10 s here), so fixtures start one per module or session, never per test.

The broker keeps its data and logs in the directory it is given; `KAFKA_HOME` itself may be read-only
(CI gets a copy of `shared/` without write bits).
"""

from __future__ import annotations

import base64
import contextlib
import os
import signal
import socket
import struct
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests.support.server import free_port

KAFKA_HOME_ENV = "KAFKA_HOME"
_API_VERSIONS_V0 = struct.pack(">ihhi", 10, 18, 0, 1) + struct.pack(">h", -1)


def kafka_home() -> Path | None:
    """The Kafka distribution named by `KAFKA_HOME`, when it holds the broker's start script."""
    value = os.environ.get(KAFKA_HOME_ENV)
    if not value:
        return None
    home = Path(value)
    return home if (home / "bin" / "kafka-server-start.sh").is_file() else None


def require_kafka_home() -> Path:
    home = kafka_home()
    if home is None:
        pytest.skip(f"needs Apache Kafka 4.0: set {KAFKA_HOME_ENV} to a kafka_2.13-4.0.0 distribution "
                    "(.ci/run sets it from ../shared/kafka when that folder exists)")
    return home


def _answers_api_versions(port: int) -> bool:
    """True once the broker's listener answers a real ApiVersions v0 request."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as sock:
            sock.sendall(_API_VERSIONS_V0)
            head = sock.recv(4)
            return len(head) == 4 and struct.unpack(">i", head)[0] > 0
    except OSError:
        return False


def _cluster_id() -> str:
    """A random cluster id as Kafka's `Uuid.randomUuid` makes one: never starting with '-', which
    `kafka-storage.sh format -t` would read as an option (and fail the fixture)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


class KafkaBroker:
    """One Apache Kafka broker (broker and controller in one process) as a child process."""

    def __init__(self, home: Path, workdir: Path, overrides: dict[str, str] | None = None) -> None:
        self.home = home
        self.workdir = workdir
        self.port = free_port()
        self.controller_port = free_port()
        self.overrides = overrides or {}
        self.proc: subprocess.Popen[bytes] | None = None
        self.cluster_id = _cluster_id()
        self._formatted = False

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _properties(self) -> Path:
        settings = {
            "node.id": "1",
            "process.roles": "broker,controller",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "controller.listener.names": "CONTROLLER",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(self.workdir / "data"),
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "4",
            "group.initial.rebalance.delay.ms": "0",
            # A restart on kept data otherwise waits ~9 s for the old registration to expire.
            "broker.session.timeout.ms": "3000",
            "group.consumer.min.heartbeat.interval.ms": "500",
            "group.consumer.heartbeat.interval.ms": "500",
            **self.overrides,
        }
        path = self.workdir / "server.properties"
        path.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
        return path

    def _env(self) -> dict[str, str]:
        return {**os.environ, "LOG_DIR": str(self.workdir / "logs"),
                "KAFKA_HEAP_OPTS": "-Xmx512M -Xms512M"}

    def start(self, timeout: float = 90.0) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        properties = self._properties()
        if not self._formatted:
            subprocess.run([str(self.home / "bin" / "kafka-storage.sh"), "format", "-t", self.cluster_id,
                            "-c", str(properties)], env=self._env(), check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)
            self._formatted = True
        log = open(self.workdir / "broker.out", "ab")  # noqa: SIM115 - the child process owns it
        self.proc = subprocess.Popen([str(self.home / "bin" / "kafka-server-start.sh"), str(properties)],
                                     env=self._env(), stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout
        while not _answers_api_versions(self.port):
            if self.proc.poll() is not None:
                raise AssertionError(f"Kafka exited with {self.proc.returncode}; see {self.workdir / 'broker.out'}")
            if time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"Kafka did not answer ApiVersions within {timeout}s")
            time.sleep(0.2)

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM the broker's process group (the start script execs java), SIGKILL after `timeout`."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
