"""Java clients from ../shared/kafka for tests that hold the wire against Kafka's own code: where
they are (an environment variable, set by `.ci/run` when the folder exists) and compiling and
running a small program against them. Tests skip with the reason when either is missing."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

TRUNK_CLIENTS_ENV = "KAFKA_TRUNK_CLIENTS"
"""A folder of jars: kafka-clients and kafka-streams built from Apache trunk (4.5.0-SNAPSHOT)."""


STREAMS_CLIENTS_ENV = "KAFKA_CLIENTS_430"
"""A folder of jars: the Kafka 4.3.0 clients and Kafka Streams 4.3.0 (StreamsGroupHeartbeat v0)."""


def require_streams_clients() -> Path:
    folder = os.environ.get(STREAMS_CLIENTS_ENV)
    if not folder or not any(Path(folder).glob("kafka-streams-*.jar")):
        pytest.skip(f"needs the Kafka Streams 4.3.0 Java client: set {STREAMS_CLIENTS_ENV} to a folder of its jars "
                    "(.ci/run sets it from ../shared/kafka/clients-4.3.0 when that folder exists)")
    if shutil.which("javac") is None or shutil.which("java") is None:
        pytest.skip("needs a JDK (javac and java) to compile and run the Java side")
    return Path(folder)


def classpath(jars: Path) -> str:
    return ":".join(str(j) for j in sorted(jars.glob("*.jar")))


def compile_java(source: Path, jars: Path, out: Path, timeout: float = 120.0) -> Path:
    """Compile `source` against every jar in `jars` into `out` (once per test session or module)."""
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run(["javac", "-cp", classpath(jars), "-d", str(out), str(source)], check=True, timeout=timeout,
                   capture_output=True)
    return out


def require_trunk_clients() -> Path:
    folder = os.environ.get(TRUNK_CLIENTS_ENV)
    if not folder or not any(Path(folder).glob("kafka-clients-*.jar")):
        pytest.skip(f"needs Apache Kafka's trunk Java clients: set {TRUNK_CLIENTS_ENV} to a folder of their jars "
                    "(.ci/run sets it from ../shared/kafka/clients-4.5.0-SNAPSHOT when that folder exists)")
    if shutil.which("javac") is None or shutil.which("java") is None:
        pytest.skip("needs a JDK (javac and java) to compile and run the Java side")
    return Path(folder)


def run_java(source: Path, jars: Path, workdir: Path, timeout: float = 60.0) -> str:
    """Compile `source` (one public class) against every jar in `jars`, run it, return its stdout."""
    classpath = ":".join(str(j) for j in sorted(jars.glob("*.jar")))
    out = workdir / "classes"
    out.mkdir(exist_ok=True)
    subprocess.run(["javac", "-cp", classpath, "-d", str(out), str(source)], check=True, timeout=timeout,
                   capture_output=True)
    done = subprocess.run(["java", "-cp", f"{classpath}:{out}", source.stem], check=True, timeout=timeout,
                          capture_output=True, text=True)
    return done.stdout
