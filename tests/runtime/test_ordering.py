"""Pipelined requests on one connection are answered in request order; replies that only wait for
the log let the requests behind them be served meanwhile (their records share an fsync)."""

from __future__ import annotations

import struct

import pytest
from kio.schema.api_versions.v0.request import ApiVersionsRequest
from kio.schema.metadata.v12.request import MetadataRequest
from prometheus_client import REGISTRY

from coordinator.node.server import CoordinatorServer
from protocol.client import encode_request
from tests.support.wire import WireClient, request


def _commit(correlation_id: int, group: str, offset: int) -> bytes:
    return encode_request(8, correlation_id, "t", request(
        8, 9, group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        topics=[{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": offset,
                                              "committed_leader_epoch": -1, "committed_metadata": ""}]}]))


def _log_batches() -> float:
    return REGISTRY.get_sample_value("coordinator_log_batch_entries_count") or 0.0


@pytest.fixture
def server(server_with_topic: CoordinatorServer) -> CoordinatorServer:
    """These commits name topic "t", which must exist (Kafka refuses unknown topics)."""
    return server_with_topic


@pytest.mark.asyncio
async def test_pipelined_requests_come_back_in_order(server: CoordinatorServer, client: WireClient) -> None:
    frames = b""
    expected = []
    for correlation_id in range(1, 201):
        if correlation_id % 2:
            frames += encode_request(18, correlation_id, "t", ApiVersionsRequest())
            expected.append((correlation_id, 18, 0))
        else:
            frames += encode_request(3, correlation_id, "t", MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                                                           include_topic_authorized_operations=False))
            expected.append((correlation_id, 3, 12))
    await client.send_raw(frames)
    for correlation_id, api_key, version in expected:
        got, _ = await client.receive(api_key, version)
        assert got == correlation_id


@pytest.mark.asyncio
async def test_replies_that_wait_for_the_log_keep_their_place_among_pipelined_requests(
        server: CoordinatorServer, client: WireClient) -> None:
    # Every OffsetCommit writes a record, so its reply waits for the fsync (a deferred reply);
    # ApiVersions is answered at once. Pipelined together, they still come back in request order,
    # and each commit is durable state by the time its reply arrives.
    frames = b""
    expected = []
    for correlation_id in range(1, 61):
        if correlation_id % 3:
            frames += encode_request(8, correlation_id, "t", request(
                8, 9, group_id="ordered", generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                topics=[{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": correlation_id,
                                                      "committed_leader_epoch": -1, "committed_metadata": ""}]}]))
            expected.append((correlation_id, 8, 9))
        else:
            frames += encode_request(18, correlation_id, "t", ApiVersionsRequest())
            expected.append((correlation_id, 18, 0))
    await client.send_raw(frames)
    for correlation_id, api_key, version in expected:
        got, body = await client.receive(api_key, version)
        assert got == correlation_id
        if api_key == 8:
            assert [p.error_code for t in body.topics for p in t.partitions] == [0]
    fetched = await client.request(request(9, 9, groups=[{"group_id": "ordered", "member_id": None, "member_epoch": -1,
                                                          "topics": [{"name": "t", "partition_indexes": [0]}]}],
                                           require_stable=False))
    assert [p.committed_offset for t in fetched.groups[0].topics for p in t.partitions] == [59]


@pytest.mark.asyncio
async def test_commits_pipelined_on_one_connection_share_their_fsyncs(
        server: CoordinatorServer, client: WireClient) -> None:
    # Each commit's reply waits for its record's fsync. Served one at a time, 150 commits on one
    # connection would cost 150 write-and-fsync rounds; the ones behind a reply that only waits for
    # the log are served meanwhile (at most 64 replies wait at a time), so their records go out
    # together.
    before = _log_batches()
    await client.send_raw(b"".join(_commit(cid, "piped", cid) for cid in range(1, 151)))
    for correlation_id in range(1, 151):
        got, body = await client.receive(8, 9)
        assert got == correlation_id
        assert [p.error_code for t in body.topics for p in t.partitions] == [0]
    rounds = _log_batches() - before
    assert 3 <= rounds <= 75, f"{rounds} log batches for 150 pipelined commits"
    fetched = await client.request(request(9, 9, groups=[{"group_id": "piped", "member_id": None, "member_epoch": -1,
                                                          "topics": [{"name": "t", "partition_indexes": [0]}]}],
                                           require_stable=False))
    assert [p.committed_offset for t in fetched.groups[0].topics for p in t.partitions] == [150]


@pytest.mark.asyncio
async def test_a_bad_frame_behind_waiting_replies_closes_the_connection_after_they_leave(
        server: CoordinatorServer, client: WireClient) -> None:
    # Kafka would have answered the commits before it read the bad frame: so are they here.
    bad = struct.pack(">ihhi", 10, 9999, 0, 6) + b"\x00\x00"  # an api key nobody serves
    await client.send_raw(b"".join(_commit(cid, "closing", cid) for cid in range(1, 6)) + bad)
    for correlation_id in range(1, 6):
        got, body = await client.receive(8, 9)
        assert got == correlation_id
        assert [p.error_code for t in body.topics for p in t.partitions] == [0]
    assert await client.closed_by_peer()
