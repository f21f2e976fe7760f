"""The sidecar tells the truth about its upstream: started while the upstream is down, or left by it
later, it answers every client at once (ApiVersions, Metadata without leaders, the errors a broker
gives for partitions whose leader is not available, COORDINATOR_LOAD_IN_PROGRESS for groups until
it has read the upstream once), keeps /readyz false while the upstream is unreachable and true
again once it is back, and logs the outage in a few rate-limited lines."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from coordinator.sidecar.cluster import PROBE_INTERVAL_S
from protocol.errors import ErrorCode
from tests.support.server import ServerProcess, free_port, http_get, wait_until
from tests.support.wire import WireClient, call, request

from .conftest import free_base_port, sidecar_process, start_mock_cluster, stop_process
from .test_lifecycle import events, upstream_server

pytestmark = pytest.mark.interop

PRODUCE, FETCH, LIST_OFFSETS, METADATA, FIND_COORDINATOR, API_VERSIONS, CREATE_TOPICS, OFFSET_FETCH = (
    0, 1, 2, 3, 10, 18, 19, 9)


def ask(port: int, req: Any) -> Any:
    return asyncio.run(call(port, req, timeout=5))


def metadata(port: int, topics: list[str] | None) -> Any:
    return ask(port, request(METADATA, 12, topics=None if topics is None else [{"name": t} for t in topics],
                             allow_auto_topic_creation=False, include_topic_authorized_operations=False))


def api_versions_request() -> Any:
    return request(API_VERSIONS, 3, client_software_name="test", client_software_version="1")


def versions_table(response: Any) -> dict[int, tuple[int, int]]:
    assert response.error_code == ErrorCode.NONE
    return {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys}


def api_keys(port: int) -> dict[int, tuple[int, int]]:
    return versions_table(ask(port, api_versions_request()))


def offset_fetch(port: int, group: str) -> Any:
    return ask(port, request(OFFSET_FETCH, 7, group_id=group, topics=None, require_stable=False))


def reachable_gauge(server: ServerProcess) -> float:
    _, body = http_get(server.metrics_port, "/metrics")
    values = [line.split()[-1] for line in body.decode().splitlines()
              if line.startswith("coordinator_sidecar_upstream_reachable ")]
    assert len(values) == 1, values
    return float(values[0])


def closed_after(port: int, req: Any) -> bool:
    async def run() -> bool:
        client = await WireClient.connect(port)
        try:
            await client.send(req)
            return await client.closed_by_peer(10)
        finally:
            await client.close()

    return asyncio.run(run())


async def acks_zero_then_metadata(port: int) -> bool:
    client = await WireClient.connect(port)
    try:
        await client.send(request(PRODUCE, 9, transactional_id=None, acks=0, timeout=1000, topic_data=[
            {"name": "t", "partition_data": [{"index": 0, "records": None}]}]))
        cid = await client.send(request(METADATA, 12, topics=[], allow_auto_topic_creation=False,
                                        include_topic_authorized_operations=False))
        got, _ = await client.receive(METADATA, 12)
        return bool(got == cid)
    finally:
        await client.close()


class Collected(logging.Handler):
    """librdkafka's log lines, as the client would print them."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_a_sidecar_started_before_its_upstream_answers_and_turns_ready_when_it_comes(tmp_path) -> None:
    upstream_port = free_port()
    server = sidecar_process(tmp_path / "sidecar", f"127.0.0.1:{upstream_port}", free_base_port())
    upstream = upstream_server(tmp_path, upstream_port, "t:2")
    logger = logging.getLogger("sidecar-upstream-away-client")
    collected = Collected()
    logger.addHandler(collected)
    consumer: Consumer | None = None
    told: WireClient | None = None
    loop = asyncio.new_event_loop()
    try:
        server.start(wait=False)
        wait_until(lambda: any(e["event"] == "upstream_unreachable" for e in events(server)), timeout=60,
                   message="the sidecar trying its upstream")
        # ApiVersions at once: our own APIs and Metadata, nothing forwarded (nothing is known of it).
        # The connection told so is closed once the upstream's table is known, so that its client
        # asks again rather than believing the forwarded APIs are not served.
        told = loop.run_until_complete(WireClient.connect(server.port))
        table = versions_table(loop.run_until_complete(told.request(api_versions_request())))
        assert {API_VERSIONS, METADATA, FIND_COORDINATOR, OFFSET_FETCH} <= set(table)
        assert PRODUCE not in table and FETCH not in table
        # Metadata at once: the coordinator as the one broker, no controller, no leader for the topic.
        answer = metadata(server.port, ["t"])
        assert [(b.node_id, b.port) for b in answer.brokers] == [(1000000, server.port)]
        assert answer.controller_id == -1
        assert [(t.name, t.error_code, t.partitions) for t in answer.topics] == [("t", ErrorCode.LEADER_NOT_AVAILABLE, ())]
        # A Fetch in a session: the session was the upstream's, start a new one.
        fetched = ask(server.port, request(FETCH, 12, replica_id=-1, max_wait=100, min_bytes=1, max_bytes=1 << 20,
                                           isolation_level=0, session_id=7, session_epoch=3, topics=[],
                                           forgotten_topics_data=[], rack_id=""))
        assert fetched.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        # Produce with acks=0 is never answered, by a broker or here: the next request's answer
        # is the first to come back on the connection.
        assert asyncio.run(acks_zero_then_metadata(server.port))
        # Group APIs: the coordinator is loading.
        assert offset_fetch(server.port, "g").error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        assert not server.ready()

        # A real consumer joins meanwhile: nothing it logs blames the broker's version, and it
        # consumes once the upstream is there.
        # (A short ApiVersions timeout, so that a sidecar not answering would show within the wait.)
        consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "early", "logger": logger,
                             "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": 1000,
                             "api.version.request.timeout.ms": 1000})
        consumer.subscribe(["t"])
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:  # the client's own pace: it keeps asking while we watch
            consumer.poll(0.2)
        upstream.start()
        producer = Producer({"bootstrap.servers": upstream.bootstrap})
        for i in range(10):
            producer.produce("t", value=str(i).encode(), partition=i % 2)
        assert producer.flush(10) == 0
        server.wait_ready(timeout=30)
        assert loop.run_until_complete(told.closed_by_peer(10))
        assert PRODUCE in api_keys(server.port)
        values: list[bytes] = []

        def consumed_all() -> bool:
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                values.append(message.value())
            return len(values) == 10

        wait_until(consumed_all, timeout=30, interval=0, message="the ten messages through the sidecar")
        assert sorted(values) == sorted(str(i).encode() for i in range(10))
        assert not [line for line in collected.lines if "0.10" in line or "ApiVersion" in line], collected.lines
        assert "Traceback" not in server.log()
    finally:
        if consumer is not None:
            consumer.close()
        if told is not None:
            loop.run_until_complete(told.close())
        loop.close()
        logger.removeHandler(collected)
        server.stop()
        upstream.stop()


def test_an_upstream_that_goes_away_turns_readiness_off_and_leaders_unavailable(tmp_path) -> None:
    upstream_port = free_port()
    upstream = upstream_server(tmp_path, upstream_port, "t:2").start()
    base = free_base_port()
    server = sidecar_process(tmp_path / "sidecar", upstream.bootstrap, base).start()
    broker = base + 1  # our listener for upstream broker 1
    try:
        before = api_keys(server.port)
        assert PRODUCE in before
        assert offset_fetch(server.port, "known").error_code == ErrorCode.NONE  # imported: nothing upstream
        upstream.stop()
        wait_until(lambda: not server.ready(), timeout=10, message="/readyz false with the upstream gone")
        gone_at = time.monotonic()
        assert reachable_gauge(server) == 0.0

        # ApiVersions: the table the upstream last gave, as before.
        assert api_keys(server.port) == before
        # Metadata: the brokers as before, each partition without a leader.
        answer = metadata(server.port, None)
        assert {b.node_id: b.port for b in answer.brokers} == {1: broker, 1000000: server.port}
        assert answer.controller_id == -1
        assert [(t.name, [(p.partition_index, p.error_code, p.leader_id) for p in t.partitions]) for t in answer.topics] \
            == [("t", [(0, ErrorCode.LEADER_NOT_AVAILABLE, -1), (1, ErrorCode.LEADER_NOT_AVAILABLE, -1)])]
        # Data requests on the broker's listener: what a broker that does not lead the partition says.
        produced = ask(broker, request(PRODUCE, 9, transactional_id=None, acks=-1, timeout=1000, topic_data=[
            {"name": "t", "partition_data": [{"index": 0, "records": None}]}]))
        assert [(t.name, [(p.index, p.error_code) for p in t.partition_responses]) for t in produced.responses] \
            == [("t", [(0, ErrorCode.NOT_LEADER_OR_FOLLOWER)])]
        fetched = ask(broker, request(FETCH, 12, replica_id=-1, max_wait=100, min_bytes=1, max_bytes=1 << 20,
                                      isolation_level=0, session_id=0, session_epoch=-1, topics=[
                                          {"topic": "t", "partitions": [{"partition": 1, "fetch_offset": 0,
                                                                         "partition_max_bytes": 1 << 20}]}],
                                      forgotten_topics_data=[], rack_id=""))
        assert fetched.error_code == ErrorCode.NONE
        assert [(p.partition_index, p.error_code) for t in fetched.responses for p in t.partitions] \
            == [(1, ErrorCode.NOT_LEADER_OR_FOLLOWER)]
        listed = ask(broker, request(LIST_OFFSETS, 7, replica_id=-1, isolation_level=0, topics=[
            {"name": "t", "partitions": [{"partition_index": 0, "timestamp": -1}]}]))
        assert [p.error_code for t in listed.topics for p in t.partitions] == [ErrorCode.NOT_LEADER_OR_FOLLOWER]
        # A request with no answer without the upstream closes its connection, as a broker going
        # away; twenty clients doing so make one log line, not twenty.
        for _ in range(20):
            assert closed_after(server.port, request(CREATE_TOPICS, 7, topics=[], timeout=1000, validate_only=False))
        closed = [e for e in events(server) if e["event"] == "connection_closed" and e["reason"] == "upstream_unavailable"]
        assert 1 <= len(closed) <= 2, closed
        # Groups live here: still served. A group new to the sidecar cannot import its upstream
        # offsets now: it is still loading.
        assert offset_fetch(server.port, "known").error_code == ErrorCode.NONE
        assert offset_fetch(server.port, "new").error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS

        # Back: ready again, and forwarding again.
        upstream.start()
        wait_until(server.ready, timeout=20, message="/readyz true with the upstream back")
        assert reachable_gauge(server) == 1.0
        away_s = time.monotonic() - gone_at
        wait_until(lambda: metadata(server.port, ["t"]).topics[0].partitions[0].leader_id == 1, timeout=10,
                   message="Metadata forwarded again")
        assert offset_fetch(server.port, "new").error_code == ErrorCode.NONE
        # The outage in a few lines: one when it started, at most one per 10 s after, one at its end.
        logged = [e for e in events(server) if e["event"] == "upstream_unreachable"]
        assert 1 <= len(logged) <= 2 + away_s // 10, logged
        back = [e for e in events(server) if e["event"] == "upstream_reachable"]
        assert len(back) == 1
        assert back[0]["failures"] >= len(logged) + sum(e.get("repeated", 0) for e in logged)
        assert "Traceback" not in server.log()
    finally:
        server.stop()
        upstream.stop()


def test_a_topic_a_client_saw_here_is_described_while_the_upstream_is_away(tmp_path) -> None:
    upstream = upstream_server(tmp_path, free_port(), "t:2").start()
    base = free_base_port()
    server = sidecar_process(tmp_path / "sidecar", upstream.bootstrap, base).start()
    broker = base + 1
    try:
        # Created upstream after the sidecar read its topics (it reads them every 5 minutes).
        admin = AdminClient({"bootstrap.servers": upstream.bootstrap})
        admin.create_topics([NewTopic("late", num_partitions=3, replication_factor=1)])["late"].result(10)
        # A client sees "late" in a forwarded answer: the sidecar reads the upstream's topics again.
        assert [len(t.partitions) for t in metadata(broker, ["late"]).topics] == [3]
        wait_until(lambda: any(e["event"] == "upstream_topic_changed" and e["topic"] == "late"
                               for e in events(server)), timeout=10, message="the catalog reading the topic seen")
        admin.create_topics([NewTopic("unseen", num_partitions=2, replication_factor=1)])["unseen"].result(10)
        upstream.stop()
        wait_until(lambda: not server.ready(), timeout=10, message="/readyz false with the upstream gone")
        # "late" is described with its partitions, as a client knows it: it keeps it and its count.
        answer = metadata(broker, ["late"])
        assert [(t.name, t.error_code, [(p.partition_index, p.error_code) for p in t.partitions])
                for t in answer.topics] == [("late", ErrorCode.NONE, [(i, ErrorCode.LEADER_NOT_AVAILABLE)
                                                                      for i in range(3)])]
        # "unseen" was created since the last read: it cannot be described, so it is not answered
        # (the connection closes, as a broker that is down answers nothing), alone or with others.
        for names in (["unseen"], ["t", "unseen"]):
            assert closed_after(broker, request(METADATA, 12, topics=[{"name": n} for n in names],
                                                allow_auto_topic_creation=False,
                                                include_topic_authorized_operations=False))
        assert "Traceback" not in server.log()
    finally:
        server.stop()
        upstream.stop()


class Relay:
    """A TCP relay on 127.0.0.1 to one address, in a thread of its own: a bootstrap server that
    can be taken away while the brokers behind it stay up."""

    def __init__(self, target: str) -> None:
        host, port = target.rsplit(":", 1)
        self.target = (host, int(port))
        self.loop = asyncio.new_event_loop()
        self.streams: list[asyncio.StreamWriter] = []
        self.server = self.loop.run_until_complete(asyncio.start_server(self._relay, "127.0.0.1", 0))
        self.port = int(self.server.sockets[0].getsockname()[1])
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        self.streams += [writer, up_writer]

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError):
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            sink.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    def close(self) -> None:
        async def shut() -> None:
            self.server.close()
            for stream in self.streams:
                stream.close()

        asyncio.run_coroutine_threadsafe(shut(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


def test_the_bootstrap_server_gone_is_not_the_upstream_gone(tmp_path) -> None:
    proc, brokers = start_mock_cluster(3)
    relay = Relay(brokers.split(",")[0])
    server = sidecar_process(tmp_path / "sidecar", f"127.0.0.1:{relay.port}", free_base_port())
    try:
        server.start()
        relay.close()
        # The sidecar asks the brokers it read instead: ready all along, forwarding as before.
        deadline = time.monotonic() + 2 * PROBE_INTERVAL_S + 0.5
        while time.monotonic() < deadline:  # a window holding at least one probe after the loss
            assert server.ready()
            time.sleep(0.1)
        answer = metadata(server.port, None)
        assert answer.controller_id != -1  # the upstream's answer (one made here names none)
        assert not [e for e in events(server) if e["event"] == "upstream_unreachable"]
    finally:
        server.stop()
        stop_process(proc)
