"""Share group offsets with Apache Kafka's own Admin client (kafka-clients 4.3.0, compiled once with
the machine's javac) against the embedded server: listShareGroupOffsets gives the start offsets and
lag a Java share consumer left, describeShareGroups and listGroups see the group; alterShareGroupOffsets
is refused while the consumer is in the group and moves the start offsets once it left (a new consumer
is given the records from there); deleteShareGroupOffsets forgets the topic. An unknown group and a
group of another type get the exceptions Kafka's error codes map to.

(confluent-kafka's AdminClient has no share group calls yet: Java's Admin is the real client here.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.interop.test_share_java import CLIENTS_ENV, JavaReader
from tests.support.clients import produce
from tests.support.polling import eventually
from tests.support.server import ServerProcess, running_server

JAVA = Path(__file__).parent / "java"
RECORDS = 20  # over 2 partitions: offsets 0..9 in each


@pytest.fixture(scope="module")
def classpath(tmp_path_factory: pytest.TempPathFactory) -> str:
    """ShareAdmin and ShareReader compiled once for the module."""
    folder = os.environ.get(CLIENTS_ENV)
    if not folder or not (Path(folder) / "kafka-clients-4.3.0.jar").exists():
        pytest.skip(f"needs Apache Kafka 4.3.0's Java clients: set {CLIENTS_ENV} to their folder "
                    "(.ci/run sets it from ../shared/kafka/clients-4.3.0 when that folder exists)")
    if shutil.which("javac") is None or shutil.which("java") is None:
        pytest.skip("needs a JDK (javac and java) to compile and run the Java admin client")
    jars = ":".join(str(j) for j in sorted(Path(folder).glob("*.jar")))
    out = tmp_path_factory.mktemp("share-admin-java")
    subprocess.run(["javac", "-cp", jars, "-d", str(out), str(JAVA / "ShareAdmin.java"), str(JAVA / "ShareReader.java")],
                   check=True, timeout=120, capture_output=True)
    return f"{jars}:{out}"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    with running_server(tmp_path, overrides={"topics": "orders:2", "share.auto.offset.reset": "earliest",
                                             "group.share.heartbeat.interval.ms": "1000"}) as instance:
        yield instance


def admin(classpath: str, server: ServerProcess, *commands: str) -> list[list[str]]:
    """Run ShareAdmin with `commands`; its output lines, split into words."""
    run = subprocess.run(["java", "-cp", classpath, "ShareAdmin", server.bootstrap, *commands],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr[-2000:]
    return [line.split() for line in run.stdout.splitlines() if line.strip()]


def offsets(classpath: str, server: ServerProcess, group: str) -> dict[int, tuple[int, int]]:
    """partition -> (start offset, lag) as listShareGroupOffsets answers."""
    return {int(w[3]): (int(w[4]), int(w[5])) for w in admin(classpath, server, f"offsets {group}") if w[0] == "offset"}


@pytest.mark.asyncio
async def test_java_admin_describes_alters_and_deletes_share_group_offsets(server: ServerProcess, classpath: str) -> None:
    produce(server.bootstrap, "orders", RECORDS, 2)
    reader = JavaReader(classpath, server.bootstrap, "java-admin", "orders")
    try:
        await eventually(lambda: len(set(reader.records)) >= RECORDS, timeout=60, message="every record read")
        # Implicit acknowledgement: what a poll gave is acknowledged with the next poll.
        await eventually(lambda: offsets(classpath, server, "java-admin") == {0: (10, 0), 1: (10, 0)}, timeout=30,
                         interval=0.5, message="every record acknowledged")
        listed = admin(classpath, server, "list", "describe java-admin", "alter java-admin orders:0=2")
        assert ["group", "java-admin", "Stable"] in listed
        described = next(w for w in listed if w[0] == "described")
        assert described[2:] == ["Stable", "1"]
        member = next(w for w in listed if w[0] == "member")
        assert member[3] == "orders-0,orders-1"
        assert ["error", "java-admin", "GroupNotEmptyException"] in listed, listed
    finally:
        reader.stop()
    assert reader.closed

    await eventually(lambda: ["described", "java-admin", "Empty", "0"] in admin(classpath, server, "describe java-admin"),
                     timeout=30, interval=0.5, message="the group empty")
    assert admin(classpath, server, "alter java-admin orders:0=2,orders:1=5") == [["altered", "java-admin"]]
    assert offsets(classpath, server, "java-admin") == {0: (2, 8), 1: (5, 5)}

    again = JavaReader(classpath, server.bootstrap, "java-admin", "orders")
    try:
        wanted = {(0, o) for o in range(2, 10)} | {(1, o) for o in range(5, 10)}
        await eventually(lambda: set(again.records) >= wanted, timeout=60, message="the records from the new starts")
    finally:
        again.stop()
    assert set(again.records) == wanted, "nothing before the new start offsets"

    await eventually(lambda: ["described", "java-admin", "Empty", "0"] in admin(classpath, server, "describe java-admin"),
                     timeout=30, interval=0.5, message="the group empty again")
    assert admin(classpath, server, "delete java-admin orders") == [["deleted", "java-admin"]]
    assert offsets(classpath, server, "java-admin") == {}


def test_java_admin_gets_kafkas_errors_for_unknown_groups_and_groups_of_another_type(
        server: ServerProcess, classpath: str) -> None:
    plain = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "plain", "enable.auto.commit": False})
    try:
        plain.commit(offsets=[TopicPartition("orders", 0, 1)], asynchronous=False)  # a classic group now
    finally:
        plain.close()
    answers = admin(classpath, server, "describe nobody", "offsets nobody", "delete nobody orders",
                    "alter plain orders:0=0", "delete plain orders", "describe plain")
    assert answers == [
        ["error", "nobody", "GroupIdNotFoundException"],
        ["error", "nobody", "GroupIdNotFoundException"],
        ["error", "nobody", "GroupIdNotFoundException"],
        ["error", "plain", "GroupIdNotFoundException"],
        ["error", "plain", "GroupIdNotFoundException"],
        ["error", "plain", "GroupIdNotFoundException"],
    ]
