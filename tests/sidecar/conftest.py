"""Fixtures for sidecar mode: real upstream clusters (librdkafka's 3-broker mock cluster, this
project's own embedded server, Apache Kafka 4.0 when `KAFKA_HOME` names it) and a coordinator in sidecar mode in front of them, each a child
process stopped by its process id."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.kafka import KafkaBroker
from tests.support.server import ServerProcess, free_port


@dataclass
class Upstream:
    bootstrap: str
    addresses: set[str]  # every host:port the upstream's brokers listen on
    process: subprocess.Popen[bytes] | ServerProcess | KafkaBroker


def start_mock_cluster(brokers: int = 3) -> tuple[subprocess.Popen[bytes], str]:
    proc = subprocess.Popen([sys.executable, "-m", "tests.sidecar.mock_cluster", str(brokers)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    line = proc.stdout.readline().decode().strip()  # blocks until the cluster is up (or the process died)
    if not line:
        proc.kill()
        raise AssertionError(f"mock cluster did not start (exit {proc.wait(5)})")
    return proc, line


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(10)
    if proc.stdout is not None:
        proc.stdout.close()


@pytest.fixture
def mock_upstream() -> Iterator[Upstream]:
    proc, bootstrap = start_mock_cluster(3)
    try:
        yield Upstream(bootstrap, set(bootstrap.split(",")), proc)
    finally:
        stop_process(proc)


@pytest.fixture
def embedded_upstream(tmp_path: Path) -> Iterator[Upstream]:
    server = ServerProcess(tmp_path / "upstream-data", overrides={"node.id": "1", "num.partitions": "4"})
    server.start()
    try:
        yield Upstream(server.bootstrap, {server.bootstrap}, server)
    finally:
        server.stop()


@pytest.fixture
def kafka_upstream(kafka_broker: KafkaBroker) -> Upstream:
    """The session's Apache Kafka 4.0 broker (topics auto-created with 3 partitions)."""
    return Upstream(kafka_broker.bootstrap, {kafka_broker.bootstrap}, kafka_broker)


def free_base_port(node_ids: range = range(0, 8)) -> int:
    """A base port whose base + id is free for every id in `node_ids` (checked by binding)."""
    for _ in range(50):
        base = free_port() - node_ids.start
        if base + node_ids.stop > 65535:
            continue
        with contextlib.ExitStack() as stack:
            try:
                for node_id in node_ids:
                    s = stack.enter_context(socket.socket())
                    s.bind(("127.0.0.1", base + node_id))
            except OSError:
                continue
            return base
    raise AssertionError("no free range of ports")


def sidecar_process(data_dir: Path, upstream: str, base_port: int, port: int | None = None,
                    metrics_port: int | None = None, **overrides: str) -> ServerProcess:
    return ServerProcess(data_dir, port=port, metrics_port=metrics_port, overrides={
        "upstream.bootstrap.servers": upstream,
        "sidecar.listener.base.port": str(base_port),
        "upstream.offsets.mirror.interval.ms": "200",
        "log.flush.policy": "none" if os.environ.get("SIDECAR_NO_FSYNC") else "always",
        **overrides,
    })


@pytest.fixture
def sidecar_on_mock(tmp_path: Path, mock_upstream: Upstream) -> Iterator[tuple[ServerProcess, Upstream]]:
    server = sidecar_process(tmp_path / "sidecar-data", mock_upstream.bootstrap, free_base_port())
    server.start()
    try:
        yield server, mock_upstream
    finally:
        server.stop()
