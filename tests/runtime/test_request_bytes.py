"""`queued.max.request.bytes`: the server-wide budget of request bytes held in memory. Peers that
claim large frames and send them slowly spend it and then wait; small requests keep being served;
a large request waits for room instead of being refused, and everything is given back on close."""

from __future__ import annotations

import asyncio
import struct

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.list_groups.v4.request import ListGroupsRequest

from coordinator.config import ConfigError, resolve
from coordinator.node.server import CoordinatorServer
from coordinator.runtime.request_bytes import FREE_BYTES, LEAST_READ, RequestBytes
from tests.runtime.conftest import make_config
from tests.support.polling import eventually
from tests.support.wire import WireClient

MAX_FRAME = 64 * 1024
BUDGET = 256 * 1024
HOLDERS = 30


class Reader:
    """A connection as the budget sees it: what its frame lacks, and whether it was let read."""

    def __init__(self, missing: int) -> None:
        self.missing = missing
        self.freed = 0

    def budget_freed(self) -> None:
        self.freed += 1


def test_the_waiter_nearest_to_the_end_of_its_frame_overdraws_one_at_a_time() -> None:
    budget = RequestBytes(1000)
    budget.add(1200)
    far, near, middle, whole = Reader(900), Reader(100), Reader(300), Reader(0)
    for waiter in (far, near, middle, whole):
        budget.wait(waiter)
    assert budget.overdraft is far  # the only one waiting when it came
    assert budget.may_hold(far, 400) and budget.may_hold(far, 499)
    assert not budget.may_hold(far, 1)  # its 900 bytes are in: its turn is over
    budget.wait(far)
    assert budget.overdraft is near and near.freed == 1  # then the one lacking least
    budget.frame_in(near)
    assert budget.overdraft is middle
    budget.forget(middle)  # closed while overdrawing
    assert budget.overdraft is far  # lacking 0 ("whole" holds only whole frames) is never chosen
    budget.add(-1000)  # handled frames bring it under the limit: everyone reads again
    assert budget.waiting == 0 and whole.freed == 1 and near.freed == 1


def _claim(size: int) -> bytes:
    """A size prefix and an ApiVersions header: the start of a frame of `size` bytes."""
    return struct.pack(">ihhi", size, 18, 3, 7)


async def _holder(port: int, sent: int) -> asyncio.StreamWriter:
    """A connection that claims the largest frame allowed and sends only `sent` bytes of it."""
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(_claim(MAX_FRAME) + b"x" * sent)
    return writer


@pytest.mark.asyncio
async def test_a_spent_budget_stops_the_holders_serves_small_requests_and_makes_a_large_one_wait(tmp_path) -> None:
    server = CoordinatorServer(make_config(tmp_path, **{"socket.request.max.bytes": str(MAX_FRAME),
                                                        "queued.max.request.bytes": str(BUDGET)}))
    await server.start()
    budget = server.connections.request_bytes
    holders: list[asyncio.StreamWriter] = []
    small = await WireClient.connect(server.port)
    large = await WireClient.connect(server.port)
    try:
        for _ in range(HOLDERS):  # 30 × 40 kB claimed-and-sent: far more than the 256 kB budget
            holders.append(await _holder(server.port, 40_000))
        await eventually(lambda: budget.spent and budget.waiting >= 2, message="the budget to be spent")
        await eventually(lambda: budget.held == sum(c._held for c in server.connections),
                         message="reads to settle")
        # Never more than the budget, plus each connection's free share and one cut read.
        assert budget.held <= BUDGET + (HOLDERS + 2) * (FREE_BYTES + LEAST_READ)

        answer = await small.request(ApiVersionsRequest(client_software_name="small", client_software_version="1"))
        assert answer.error_code == 0  # a heartbeat-sized request is still served

        # A 50 kB request: more than a connection's free share, so it waits for room...
        # (two strings: one over 32,767 bytes would be refused as Kafka refuses it)
        await large.send(ApiVersionsRequest(client_software_name="y" * 25_000, client_software_version="z" * 25_000))
        (waiting,) = [c for c in server.connections if c.peer.endswith(f":{large.writer.get_extra_info('sockname')[1]}")]
        await eventually(lambda: waiting._budget_wait, message="the large request to wait for the budget")

        for writer in holders:  # ... which the holders give back as they go
            writer.close()
        _, answer = await large.receive(18, 3, timeout=10)
        assert answer.error_code == 0
        await eventually(lambda: budget.held == 0 and budget.waiting == 0, message="every byte given back")
    finally:
        for writer in holders:
            writer.close()
        await small.close()
        await large.close()
        await server.stop()


@pytest.mark.asyncio
async def test_large_requests_that_together_exceed_the_budget_are_all_served(tmp_path) -> None:
    """Three 200 kB requests under a 256 kB budget: counted as they arrive, each is partly in when
    the budget is spent, so one at a time reads its frame to the end (the one nearest to done)."""
    server = CoordinatorServer(make_config(tmp_path, **{"socket.request.max.bytes": str(BUDGET),
                                                        "queued.max.request.bytes": str(BUDGET)}))
    await server.start()
    budget = server.connections.request_bytes
    clients = [await WireClient.connect(server.port) for _ in range(3)]
    try:
        for client in clients:
            # 210 kB in seven strings (one string over 32,767 bytes is refused, as Kafka refuses it).
            await client.send(ListGroupsRequest(states_filter=("z" * 30_000,) * 7))
        for client in clients:
            _, answer = await client.receive(16, 4, timeout=10)
            assert answer.error_code == 0
        assert budget.held == 0
    finally:
        for client in clients:
            await client.close()
        await server.stop()


@pytest.mark.asyncio
async def test_holders_that_stall_are_closed_by_the_idle_expiry_and_free_the_budget(tmp_path) -> None:
    """A peer that claims a frame and stops sending is idle, waiting or not: after
    connections.max.idle.ms it is closed, as Kafka's selector expires it, and its bytes return."""
    server = CoordinatorServer(make_config(tmp_path, **{"socket.request.max.bytes": str(MAX_FRAME),
                                                        "queued.max.request.bytes": str(BUDGET),
                                                        "connections.max.idle.ms": "300"}))
    await server.start()
    budget = server.connections.request_bytes
    holders: list[asyncio.StreamWriter] = []
    try:
        for _ in range(HOLDERS):
            holders.append(await _holder(server.port, 40_000))
        await eventually(lambda: budget.spent and budget.waiting >= 2, message="the budget to be spent")
        await eventually(lambda: len(server.connections) == 0, message="the stalled holders to be closed")
        assert budget.held == 0 and budget.waiting == 0 and budget.overdraft is None
    finally:
        for writer in holders:
            writer.close()
        await server.stop()


@pytest.mark.asyncio
async def test_without_a_bound_nothing_waits(tmp_path) -> None:
    server = CoordinatorServer(make_config(tmp_path, **{"socket.request.max.bytes": str(MAX_FRAME),
                                                        "queued.max.request.bytes": "-1"}))
    await server.start()
    budget = server.connections.request_bytes
    holders: list[asyncio.StreamWriter] = []
    try:
        for _ in range(HOLDERS):
            holders.append(await _holder(server.port, 40_000))
        await eventually(lambda: budget.held == HOLDERS * (8 + 40_000), message="every byte sent to be held")
        assert budget.waiting == 0
    finally:
        for writer in holders:
            writer.close()
        await server.stop()


def test_the_budget_must_hold_the_largest_request(tmp_path) -> None:
    """As Kafka: -1 (or 0) is no bound; otherwise at least socket.request.max.bytes."""
    with pytest.raises(ConfigError, match=r"queued\.max\.request\.bytes.*at least socket\.request\.max\.bytes"):
        make_config(tmp_path, **{"socket.request.max.bytes": "1000000", "queued.max.request.bytes": "999999"})
    assert make_config(tmp_path, **{"queued.max.request.bytes": "-1"})["queued.max.request.bytes"] == -1
    assert resolve(environ={}, flags={})["queued.max.request.bytes"] == 104857600
