"""The metrics listener: /metrics exposition, /healthz, /readyz."""

from __future__ import annotations

import asyncio

import pytest
from kio.schema.api_versions.v0.request import ApiVersionsRequest

from coordinator.node.server import CoordinatorServer
from protocol.build import build
from protocol.errors import ErrorCode
from protocol.schemas import request_schema
from tests.support.metrics import scrape
from tests.support.server import http_get
from tests.support.wire import WireClient


@pytest.mark.asyncio
async def test_metrics_count_requests_connections_and_bytes(server: CoordinatorServer, client: WireClient) -> None:
    port = server.metrics_port
    assert port is not None
    before = await asyncio.to_thread(scrape, port)
    for _ in range(3):
        assert (await client.request(ApiVersionsRequest())).error_code == 0
    after = await asyncio.to_thread(scrape, port)
    key = 'coordinator_requests_total{api="ApiVersions"}'
    assert after[key] - before.get(key, 0) == 3
    assert after["coordinator_connections_open"] >= 1
    assert after["coordinator_bytes_in_total"] > before.get("coordinator_bytes_in_total", 0)
    assert after["coordinator_bytes_out_total"] > before.get("coordinator_bytes_out_total", 0)
    count = 'coordinator_request_latency_seconds_count{api="ApiVersions"}'
    assert after[count] - before.get(count, 0) == 3
    assert after['coordinator_request_latency_seconds_sum{api="ApiVersions"}'] > 0
    bucket_prefix = 'coordinator_request_latency_seconds_bucket{api="ApiVersions",le="'
    buckets = [(key[len(bucket_prefix):-2], value) for key, value in after.items() if key.startswith(bucket_prefix)]
    assert buckets[-1] == ("+Inf", after[count])
    assert [float(le) for le, _ in buckets] == sorted(float(le) for le, _ in buckets)
    assert [n for _, n in buckets] == sorted(n for _, n in buckets)  # cumulative


@pytest.mark.asyncio
async def test_health_and_readiness(server: CoordinatorServer) -> None:
    port = server.metrics_port
    assert port is not None
    assert (await asyncio.to_thread(http_get, port, "/healthz"))[0] == 200
    assert (await asyncio.to_thread(http_get, port, "/readyz")) == (200, b"ready\n")
    assert (await asyncio.to_thread(http_get, port, "/nope"))[0] == 404


def _errors(samples: dict[str, float], api: str) -> dict[str, float]:
    prefix = f'coordinator_errors_total{{api="{api}",error="'
    return {key[len(prefix):-2]: value for key, value in samples.items() if key.startswith(prefix)}


@pytest.mark.asyncio
async def test_error_codes_are_counted_from_fast_encoded_and_built_responses(
        server: CoordinatorServer, client: WireClient) -> None:
    """Heartbeat and OffsetCommit responses are encoded straight from their descriptions, JoinGroup's
    through a kio entity: the per-error-code counter sees top-level and per-partition codes of both."""
    port = server.metrics_port
    assert port is not None
    before = await asyncio.to_thread(scrape, port)
    heartbeat = await client.request(build(request_schema(12, 4), {
        "group_id": "nobody-here", "generation_id": 3, "member_id": "m-1"}))
    commit = await client.request(build(request_schema(8, 8), {
        "group_id": "nobody-here", "generation_id_or_member_epoch": 3, "member_id": "m-1",
        "topics": [{"name": "t", "partitions": [{"partition_index": p, "committed_offset": 1} for p in range(3)]}]}))
    join = await client.request(build(request_schema(11, 9), {
        "group_id": "", "member_id": "", "session_timeout": 10_000, "rebalance_timeout": 10_000,
        "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]}))
    after = await asyncio.to_thread(scrape, port)

    commit_codes = [p.error_code for t in commit.topics for p in t.partitions]
    assert heartbeat.error_code != 0 and all(commit_codes) and join.error_code != 0
    for api, codes in (("Heartbeat", [heartbeat.error_code]), ("OffsetCommit", commit_codes),
                       ("JoinGroup", [join.error_code])):
        grown = {name: n - _errors(before, api).get(name, 0) for name, n in _errors(after, api).items()}
        expected: dict[str, float] = {}
        for code in codes:
            expected[code.name] = expected.get(code.name, 0) + 1
        assert {name: n for name, n in grown.items() if n} == expected, api


@pytest.mark.asyncio
async def test_accepted_commits_count_their_partitions_and_refused_ones_do_not(
        server_with_topic: CoordinatorServer) -> None:
    """The offsets-committed counter grows by the partitions a commit wrote: the two of topic "t",
    not the one past its partition count that the same commit had refused."""
    port = server_with_topic.metrics_port
    assert port is not None
    client = await WireClient.connect(server_with_topic.port)
    try:
        before = await asyncio.to_thread(scrape, port)
        commit = await client.request(build(request_schema(8, 8), {
            "group_id": "simple", "generation_id_or_member_epoch": -1, "member_id": "",
            "topics": [{"name": "t", "partitions": [{"partition_index": p, "committed_offset": 7}
                                                    for p in range(3)]}]}))
        after = await asyncio.to_thread(scrape, port)
    finally:
        await client.close()
    codes = {p.partition_index: p.error_code for t in commit.topics for p in t.partitions}
    assert codes == {0: 0, 1: 0, 2: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    key = "coordinator_offsets_committed_total"
    assert after[key] - before.get(key, 0) == 2
