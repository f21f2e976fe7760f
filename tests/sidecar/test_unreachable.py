"""The answers the sidecar gives itself while its upstream is unreachable, at every version it has
a schema for: real kio-encoded requests in, real responses out, decoded as a client decodes them."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest

from coordinator.catalog import Topic
from coordinator.sidecar.apis import decodable
from coordinator.sidecar.cluster import UpstreamCatalog
from coordinator.sidecar.unreachable import NO_RESPONSE, Fallback
from protocol.client import encode_request
from protocol.errors import ErrorCode, ProtocolError
from tests.support.wire import decode_response, request

PRODUCE, FETCH, LIST_OFFSETS, METADATA, OFFSET_FOR_LEADER_EPOCH, CREATE_TOPICS = 0, 1, 2, 3, 23, 19
INIT_PRODUCER_ID, DESCRIBE_CLUSTER = 22, 60
ORDERS = Topic("orders", uuid.uuid4(), 3)
COORDINATOR = (1000000, "127.0.0.1", 9092)


@dataclass
class LastRead:
    """What the sidecar last read of its upstream."""

    brokers: dict[int, tuple[str, int]] = field(default_factory=dict)
    cluster_id: str | None = None
    catalog: UpstreamCatalog = field(default_factory=UpstreamCatalog)


def fallback(read: LastRead, reveal_topics: bool = True) -> Fallback:
    return Fallback(read, lambda node_id: ("127.0.0.1", 19092 + node_id), lambda: [COORDINATOR],
                    reveal_topics=reveal_topics)


def answer(fb: Fallback, req: Any, correlation_id: int = 42) -> Any:
    frame = encode_request(int(req.__api_key__), correlation_id, "test", req)[4:]
    data = fb.answer(frame)
    assert data is not None and data is not NO_RESPONSE
    got, response = decode_response(int(req.__api_key__), int(req.__version__), data[4:])
    assert got == correlation_id
    return response


def versions(api_key: int) -> list[int]:
    span = decodable(api_key)
    assert span is not None
    return list(range(span[0], span[1] + 1))


def known() -> LastRead:
    read = LastRead(brokers={1: ("10.0.0.1", 9092), 2: ("10.0.0.2", 9092)}, cluster_id="upstream-cluster")
    read.catalog.replace([ORDERS])
    return read


@pytest.mark.parametrize("version", versions(METADATA))
def test_metadata_lists_our_brokers_and_no_leaders(version: int) -> None:
    fb = fallback(known())
    topics = [] if version == 0 else None  # all topics
    response = answer(fb, request(METADATA, version, topics=topics, allow_auto_topic_creation=False))
    assert [(b.node_id, b.port) for b in response.brokers] == [(1, 19093), (2, 19094), (1000000, 9092)]
    if version >= 1:
        assert response.controller_id == -1
    if version >= 2:
        assert response.cluster_id == "upstream-cluster"
    assert [(t.name, t.error_code) for t in response.topics] == [("orders", ErrorCode.NONE)]
    assert [(p.partition_index, p.error_code, p.leader_id) for p in response.topics[0].partitions] == [
        (i, ErrorCode.LEADER_NOT_AVAILABLE, -1) for i in range(3)]


def test_before_the_upstream_was_read_a_named_topic_is_one_to_retry_not_an_unknown_one() -> None:
    fb = fallback(LastRead())  # the upstream never answered
    response = answer(fb, request(METADATA, 12, topics=[{"name": "orders"}], allow_auto_topic_creation=False))
    assert [b.node_id for b in response.brokers] == [1000000]
    assert response.cluster_id is None
    assert [(t.name, t.error_code, t.partitions) for t in response.topics] == [
        ("orders", ErrorCode.LEADER_NOT_AVAILABLE, ())]
    by_id = answer(fb, request(METADATA, 12, topics=[{"name": None, "topic_id": ORDERS.topic_id}],
                               allow_auto_topic_creation=False))
    assert [(t.topic_id, t.error_code) for t in by_id.topics] == [(ORDERS.topic_id, ErrorCode.LEADER_NOT_AVAILABLE)]


def not_answered(fb: Fallback, req: Any) -> bool:
    return fb.answer(encode_request(int(req.__api_key__), 1, "test", req)[4:]) is None


@pytest.mark.parametrize("version", versions(METADATA))
def test_once_read_a_topic_not_read_is_not_answered_so_a_client_keeps_what_it_knows(version: int) -> None:
    # Created since the last read: a client may know it (from another instance, or from before the
    # outage); an answer without its partitions would tell the client it is gone.
    fb = fallback(known())
    assert not_answered(fb, request(METADATA, version, topics=[{"name": "payments"}],
                                    allow_auto_topic_creation=False))
    assert not_answered(fb, request(METADATA, version, topics=[{"name": "orders"}, {"name": "payments"}],
                                    allow_auto_topic_creation=False))
    if version >= 10:
        assert not_answered(fb, request(METADATA, version, topics=[{"name": None, "topic_id": uuid.uuid4()}],
                                        allow_auto_topic_creation=False))
        by_id = answer(fb, request(METADATA, version, topics=[{"name": None, "topic_id": ORDERS.topic_id}],
                                   allow_auto_topic_creation=False))
        assert [(t.name, len(t.partitions)) for t in by_id.topics] == [("orders", 3)]
    named = answer(fb, request(METADATA, version, topics=[{"name": "orders"}], allow_auto_topic_creation=False))
    assert [(t.name, t.error_code, len(t.partitions)) for t in named.topics] == [("orders", ErrorCode.NONE, 3)]


def test_under_an_authorizer_no_topic_is_described() -> None:
    # Before the upstream was read: nothing to lose, the listing is empty, named topics are retried.
    never_read = fallback(LastRead(), reveal_topics=False)
    assert answer(never_read, request(METADATA, 12, topics=None, allow_auto_topic_creation=False)).topics == ()
    named = answer(never_read, request(METADATA, 12, topics=[{"name": "orders"}], allow_auto_topic_creation=False))
    assert [(t.name, t.error_code, t.partitions) for t in named.topics] == [
        ("orders", ErrorCode.LEADER_NOT_AVAILABLE, ())]
    # Once read, a client may know topics it may not be told of here: neither is answered, and the
    # brokers alone (no topics asked) still are.
    fb = fallback(known(), reveal_topics=False)
    assert not_answered(fb, request(METADATA, 12, topics=None, allow_auto_topic_creation=False))
    assert not_answered(fb, request(METADATA, 12, topics=[{"name": "orders"}], allow_auto_topic_creation=False))
    brokers_only = answer(fb, request(METADATA, 12, topics=[], allow_auto_topic_creation=False))
    assert brokers_only.topics == () and [b.node_id for b in brokers_only.brokers] == [1, 2, 1000000]


@pytest.mark.parametrize("version", versions(PRODUCE))
def test_produce_is_told_the_partition_has_no_leader_here(version: int) -> None:
    topic = {"name": "orders", "topic_id": ORDERS.topic_id}
    response = answer(fallback(known()), request(PRODUCE, version, acks=-1, timeout=1000, topic_data=[
        {**topic, "partition_data": [{"index": 0, "records": None}, {"index": 2, "records": None}]}]))
    assert [(p.index, p.error_code, p.base_offset) for t in response.responses for p in t.partition_responses] == [
        (0, ErrorCode.NOT_LEADER_OR_FOLLOWER, -1), (2, ErrorCode.NOT_LEADER_OR_FOLLOWER, -1)]


def test_produce_with_acks_0_gets_no_answer() -> None:
    req = request(PRODUCE, 9, acks=0, timeout=1000, topic_data=[
        {"name": "orders", "partition_data": [{"index": 0, "records": None}]}])
    assert fallback(known()).answer(encode_request(PRODUCE, 1, "test", req)[4:]) is NO_RESPONSE


@pytest.mark.parametrize("version", versions(FETCH))
def test_fetch_is_told_the_partition_has_no_leader_here(version: int) -> None:
    response = answer(fallback(known()), request(FETCH, version, replica_id=-1, max_bytes=1 << 20, session_epoch=-1,
                                                 topics=[{"topic": "orders", "topic_id": ORDERS.topic_id,
                                                          "partitions": [{"partition": 1, "fetch_offset": 5}]}]))
    assert [(p.partition_index, p.error_code, p.high_watermark) for t in response.responses for p in t.partitions] == [
        (1, ErrorCode.NOT_LEADER_OR_FOLLOWER, -1)]
    assert all(p.records == b"" for t in response.responses for p in t.partitions)  # empty, never null


def test_a_fetch_in_a_session_is_told_to_start_a_new_one() -> None:
    response = answer(fallback(known()), request(FETCH, 12, session_id=9, session_epoch=4, topics=[]))
    assert response.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND and response.responses == ()


@pytest.mark.parametrize("version", versions(LIST_OFFSETS))
def test_list_offsets_is_told_the_partition_has_no_leader_here(version: int) -> None:
    response = answer(fallback(known()), request(LIST_OFFSETS, version, replica_id=-1, topics=[
        {"name": "orders", "partitions": [{"partition_index": 0, "timestamp": -1}]}]))
    assert [(p.partition_index, p.error_code) for t in response.topics for p in t.partitions] == [
        (0, ErrorCode.NOT_LEADER_OR_FOLLOWER)]


@pytest.mark.parametrize("version", versions(OFFSET_FOR_LEADER_EPOCH))
def test_offset_for_leader_epoch_is_told_the_partition_has_no_leader_here(version: int) -> None:
    response = answer(fallback(known()), request(OFFSET_FOR_LEADER_EPOCH, version, replica_id=-1, topics=[
        {"topic": "orders", "partitions": [{"partition": 2, "leader_epoch": 3}]}]))
    assert [(p.partition, p.error_code, p.end_offset) for t in response.topics for p in t.partitions] == [
        (2, ErrorCode.NOT_LEADER_OR_FOLLOWER, -1)]


@pytest.mark.parametrize("version", versions(DESCRIBE_CLUSTER))
def test_describe_cluster_lists_our_brokers_and_no_controller(version: int) -> None:
    response = answer(fallback(known()), request(DESCRIBE_CLUSTER, version, endpoint_type=1))
    assert response.error_code == ErrorCode.NONE and response.controller_id == -1
    assert response.cluster_id == "upstream-cluster"
    assert [(b.broker_id, b.port) for b in response.brokers] == [(1, 19093), (2, 19094), (1000000, 9092)]


@pytest.mark.parametrize("version", versions(INIT_PRODUCER_ID))
def test_init_producer_id_waits_for_a_coordinator(version: int) -> None:
    idempotent = answer(fallback(known()), request(INIT_PRODUCER_ID, version, transactional_id=None,
                                                   transaction_timeout=60000, producer_id=-1, producer_epoch=-1))
    assert (idempotent.error_code, idempotent.producer_id) == (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, -1)
    transactional = answer(fallback(known()), request(INIT_PRODUCER_ID, version, transactional_id="tx",
                                                      transaction_timeout=60000, producer_id=-1, producer_epoch=-1))
    assert transactional.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE


def test_other_requests_are_not_answered_here() -> None:
    req = request(CREATE_TOPICS, 7, topics=[], timeout=1000)
    assert fallback(known()).answer(encode_request(CREATE_TOPICS, 1, "test", req)[4:]) is None


def test_a_malformed_request_is_a_protocol_error() -> None:
    req = request(METADATA, 12, topics=[{"name": "orders"}], allow_auto_topic_creation=False)
    frame = encode_request(METADATA, 1, "test", req)[4:]
    with pytest.raises(ProtocolError):
        fallback(known()).answer(frame[:-6])
