"""Share groups with Apache Kafka's own share consumer (``KafkaShareConsumer``, kafka-clients
4.3.0, compiled once with the machine's javac), in both modes (embedded, and a sidecar in front of
Apache Kafka 4.0, which has no share groups): two Java consumers share a 2-partition topic and are
each given distinct records, every record once; the coordinator then hands out nothing more."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.interop.share_support import SIDECAR_TWIN_SLOW, ShareSetup, share_setup
from tests.support.polling import eventually

CLIENTS_ENV = "KAFKA_CLIENTS_430"
SOURCE = Path(__file__).parent / "java" / "ShareReader.java"


@pytest.fixture(scope="module")
def share_reader(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The classpath to run ShareReader with (compiled once for the module)."""
    folder = os.environ.get(CLIENTS_ENV)
    if not folder or not (Path(folder) / "kafka-clients-4.3.0.jar").exists():
        pytest.skip(f"needs Apache Kafka 4.3.0's Java clients: set {CLIENTS_ENV} to their folder "
                    "(.ci/run sets it from ../shared/kafka/clients-4.3.0 when that folder exists)")
    if shutil.which("javac") is None or shutil.which("java") is None:
        pytest.skip("needs a JDK (javac and java) to compile and run the Java share consumer")
    classpath = ":".join(str(j) for j in sorted(Path(folder).glob("*.jar")))
    out = tmp_path_factory.mktemp("share-java")
    subprocess.run(["javac", "-cp", classpath, "-d", str(out), str(SOURCE)], check=True, timeout=120,
                   capture_output=True)
    return f"{classpath}:{out}"


@pytest.fixture(params=SIDECAR_TWIN_SLOW)
def queue(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ShareSetup]:
    with share_setup(request.param, tmp_path, request, {"share.auto.offset.reset": "earliest"}) as setup:
        yield setup


@pytest.fixture(params=SIDECAR_TWIN_SLOW)
def short_locked_queue(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ShareSetup]:
    """Records locked for 2 s (Kafka's least), members fenced after 6 s without a heartbeat."""
    with share_setup(request.param, tmp_path, request, {
            "share.auto.offset.reset": "earliest", "group.share.record.lock.duration.ms": "2000",
            "group.share.session.timeout.ms": "6000", "group.share.heartbeat.interval.ms": "1000"}) as setup:
        yield setup


class JavaReader:
    """One ShareReader process; what it printed, collected by a thread."""

    def __init__(self, classpath: str, bootstrap: str, group: str, topic: str, mode: str = "read") -> None:
        self.proc = subprocess.Popen(["java", "-cp", classpath, "ShareReader", bootstrap, group, topic, mode],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True)
        self.records: list[tuple[int, int]] = []
        self.closed = False
        self.holding = False
        self.decisions: list[tuple[int, int, str]] = []  # judge mode: (partition, offset, decision)
        self._thread = threading.Thread(target=self._collect, daemon=True)
        self._thread.start()

    def _collect(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.strip()
            if line == "closed":
                self.closed = True
            elif line == "holding":
                self.holding = True
            elif line:
                partition, offset, *decision = line.split(":")
                self.records.append((int(partition), int(offset)))
                if decision:
                    self.decisions.append((int(partition), int(offset), decision[0]))

    def kill(self) -> None:
        """SIGKILL: no acknowledgement, no final request, no leave."""
        self.proc.kill()
        self.proc.wait(10)
        self._thread.join(10)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        self.proc.stdout.close()

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("stop\n")
        self.proc.stdin.flush()
        self.proc.wait(60)
        self._thread.join(10)
        self.proc.stdin.close()
        assert self.proc.stdout is not None
        self.proc.stdout.close()


async def java_readers_get_each_record_once(share_reader: str, bootstrap: str, group: str, topic: str,
                                            expected: set[tuple[int, int]], readers: int = 2,
                                            timeout: float = 60.0) -> None:
    """``readers`` Java share consumers of ``group`` read until every ``expected`` record came, then
    close: each acknowledged what it held, and each record went once, to one consumer."""
    started = [JavaReader(share_reader, bootstrap, group, topic) for _ in range(readers)]
    try:
        everything = lambda: [r for reader in started for r in reader.records]  # noqa: E731
        await eventually(lambda: len(set(everything())) >= len(expected), timeout=timeout,
                         message="every record delivered")
    finally:
        for reader in started:
            reader.stop()
    assert all(reader.closed for reader in started)  # each acknowledged what it held and closed cleanly
    delivered = everything()
    assert set(delivered) == expected and len(delivered) == len(expected)  # each record once, to one consumer


async def share_among_java_readers(queue: ShareSetup, share_reader: str, readers: int, count: int) -> None:
    """``readers`` Java share consumers of one group read ``count`` records, each once, then close;
    the coordinator is SIGKILLed and restarted over its data, and a late reader of the group gets
    only a record produced after, nothing they acknowledged."""
    queue.produce(count)
    await java_readers_get_each_record_once(share_reader, queue.bootstrap, "java-q", queue.topic,
                                            {(p, o) for p in (0, 1) for o in range(count // 2)}, readers, timeout=120)

    queue.server.kill()
    queue.server.start()
    queue.produce(1, 1)
    late = JavaReader(share_reader, queue.bootstrap, "java-q", queue.topic)
    try:
        await eventually(lambda: late.records, timeout=60, message="the new record")
    finally:
        late.stop()
    assert late.records == [(0, count // 2)]


@pytest.mark.asyncio
async def test_two_java_share_consumers_get_each_record_once_and_none_again_after_a_coordinator_sigkill(
        queue: ShareSetup, share_reader: str) -> None:
    await share_among_java_readers(queue, share_reader, 2, 2000)


@pytest.mark.slow
@pytest.mark.asyncio
async def test_five_java_share_consumers_share_ten_thousand_records(queue: ShareSetup, share_reader: str) -> None:
    await share_among_java_readers(queue, share_reader, 5, 10_000)


@pytest.mark.slow  # the confluent twin (released as the connection closes) runs by default
@pytest.mark.asyncio
async def test_records_a_java_consumer_held_when_sigkilled_go_to_another(
        short_locked_queue: ShareSetup, share_reader: str) -> None:
    queue = short_locked_queue
    queue.produce(100)
    holder = JavaReader(share_reader, queue.bootstrap, "java-held", queue.topic, "hold")
    try:
        await eventually(lambda: holder.holding, timeout=60, message="the holder's first records")
        held = set(holder.records)
    finally:
        holder.kill()  # its connections close: what it held is released at once (the share session cache)
    other = JavaReader(share_reader, queue.bootstrap, "java-held", queue.topic)
    try:
        await eventually(lambda: held <= set(other.records) and len(other.records) >= 100, timeout=60,
                         message="the held records delivered again")
    finally:
        other.stop()
    assert sorted(other.records) == sorted({(p, o) for p in (0, 1) for o in range(50)})  # once each


@pytest.mark.asyncio
async def test_a_java_consumer_releases_rejects_and_a_record_always_failing_is_archived_after_the_limit(
        queue: ShareSetup, share_reader: str) -> None:
    count = 60  # 30 per partition
    queue.produce(count)
    reader = JavaReader(share_reader, queue.bootstrap, "java-judge", queue.topic, "judge")
    poison = (0, 0)
    try:
        def judged() -> bool:
            times = Counter(reader.records)
            return (times[poison] >= 5 and set(times) == {(p, o) for p in (0, 1) for o in range(30)}
                    and all(times[(p, o)] >= 2 for p in (0, 1) for o in range(0, 30, 3) if (p, o) != poison))

        await eventually(judged, timeout=90, message="every record decided, the released ones twice")
        # Redeliveries come before anything newer of the partition: were the poison still available
        # it would come back before (or with) a record produced now.
        queue.produce(1, 1)
        await eventually(lambda: (0, 30) in reader.records, timeout=60, message="a record produced after")
    finally:
        reader.stop()
    times = Counter(reader.records)
    assert times[poison] == 5, "group.share.delivery.count.limit deliveries, then archived"
    for (p, o), n in times.items():
        if (p, o) in (poison, (0, 30)):  # the marker is released too (30 % 3 == 0): seen once or twice by now
            continue
        assert n == (2 if o % 3 == 0 else 1), ((p, o), n)  # released come back once; rejected never
    assert {d for _, o, d in reader.decisions if o % 3 == 1} == {"reject"}
