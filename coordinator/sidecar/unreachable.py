"""What a client's forwarded request gets while the upstream cannot be reached: the answer a Kafka
broker gives when the partition leaders are not available, made here instead of silence.

A route asks `Fallback.answer(frame)` when it has no open upstream connection and the upstream is
unreachable (`UpstreamCluster.reachable` false, or it was never reached):

- Metadata: the brokers as the rewritten Metadata lists them (the upstream's brokers last read, at
  our listeners, then the coordinator's own nodes), ControllerId -1 (Kafka's "no controller"),
  ClusterId the upstream's last read (null before). Topics last read are described with every
  partition LEADER_NOT_AVAILABLE, leader -1 and no replicas (Kafka's answer for a partition whose
  leader is not alive): a client keeps the topic and its partition count, so its group is not
  rebalanced. A topic can only be described that way: any answer without its partitions (an error
  at topic level, or the topic left out) tells a client the topic is gone or changed (aiokafka
  drops it, librdkafka and the Java client rejoin their group). So once the upstream has been read,
  a request naming a topic not read (by name or id: created since the last read and not yet seen
  in a forwarded answer, which refreshes the catalog) is not answered here, as a broker that is
  down answers nothing, and the client keeps what it knows. Before the upstream was ever read no
  client can have learned a topic here: a named topic is LEADER_NOT_AVAILABLE with no partitions,
  one clients retry (the upstream may well have it, so not UNKNOWN_TOPIC_OR_PARTITION). With an
  authorizer, authorization happens upstream, so nothing is told a client might not be allowed to
  see: once the upstream has been read, Metadata naming topics or asking for all of them is not
  answered (an empty listing would drop every topic); before, named topics carry no partitions
  and the listing is empty.
- Produce, Fetch, ListOffsets, OffsetForLeaderEpoch: every partition NOT_LEADER_OR_FOLLOWER, what a
  broker that does not lead a partition answers (clients refresh Metadata, which now says the
  leader is not available, and retry). Produce with acks=0 gets no answer, as from a broker. A
  Fetch in an incremental session (session id set) gets FETCH_SESSION_ID_NOT_FOUND: the session
  was the upstream's, and the client starts a new one.
- DescribeCluster: the same brokers, no controller. InitProducerId: COORDINATOR_NOT_AVAILABLE for
  a transactional id (its coordinator is an upstream partition leader), else
  COORDINATOR_LOAD_IN_PROGRESS (a broker without a producer id block from its controller).
- Anything else, and Metadata that cannot be answered as above: None. The route then fails the
  request and the client's connection closes, as when a broker goes away; the client reconnects
  (and asks ApiVersions and Metadata again).

Requests are decoded against the versions this process has schemas for (`apis.decodable`); one that
cannot be decoded is a protocol error and closes the connection, as a broker would.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from protocol.build import build
from protocol.codec import RequestCodec, encode_response
from protocol.errors import ErrorCode
from protocol.schemas import response_schema

from ..catalog import Topic
from ..security.operations import NOT_REQUESTED
from .apis import decodable
from .wire import expects_response

PRODUCE, FETCH, LIST_OFFSETS, METADATA, INIT_PRODUCER_ID, OFFSET_FOR_LEADER_EPOCH, DESCRIBE_CLUSTER = (
    0, 1, 2, 3, 22, 23, 60)
ANSWERED = (PRODUCE, FETCH, LIST_OFFSETS, METADATA, INIT_PRODUCER_ID, OFFSET_FOR_LEADER_EPOCH, DESCRIBE_CLUSTER)
NO_CONTROLLER = -1
_ZERO_UUID = uuid.UUID(int=0)

NO_RESPONSE = b""
"""`answer` for a request no broker answers (Produce with acks=0)."""


class Known(Protocol):
    """What the sidecar last read of the upstream (`UpstreamCluster`)."""

    brokers: dict[int, tuple[str, int]]
    cluster_id: str | None

    @property
    def catalog(self) -> Any: ...


class Fallback:
    def __init__(self, known: Known, address: Callable[[int], tuple[str, int]],
                 coordinators: Callable[[], Sequence[tuple[int, str, int]]], *, reveal_topics: bool) -> None:
        """`address` is where clients reach upstream broker N (our listener); `coordinators` the
        coordinator's own nodes; `reveal_topics` false under an authorizer (see the module)."""
        self._known = known
        self._address = address
        self._coordinators = coordinators
        self._reveal_topics = reveal_topics
        self._codec = RequestCodec({key: span for key in ANSWERED if (span := decodable(key)) is not None})
        self._answers: dict[int, Callable[[int, Any], dict[str, Any] | None]] = {
            PRODUCE: self._produce, FETCH: self._fetch, LIST_OFFSETS: self._list_offsets, METADATA: self._metadata,
            INIT_PRODUCER_ID: self._init_producer_id, OFFSET_FOR_LEADER_EPOCH: self._offset_for_leader_epoch,
            DESCRIBE_CLUSTER: self._describe_cluster}

    def answer(self, frame: bytes | bytearray) -> bytes | None:
        """The framed response to `frame` (a request, size prefix removed), `NO_RESPONSE`, or None
        when this request is not answered here. Raises `ProtocolError` for a malformed request."""
        api_key = int.from_bytes(frame[:2], "big", signed=True)
        if api_key not in self._answers:
            return None
        if api_key == PRODUCE and expects_response(frame) is False:
            return NO_RESPONSE
        request = self._codec.decode(bytes(frame))  # a version we have no schema for: ProtocolError
        description = self._answers[api_key](request.api_version, request.body)
        if description is None:
            return None
        return encode_response(request.correlation_id, build(response_schema(api_key, request.api_version), description))

    # -- Metadata, DescribeCluster -------------------------------------------------------------
    def _brokers(self) -> list[tuple[int, str, int]]:
        brokers = [(node_id, *self._address(node_id)) for node_id in sorted(self._known.brokers)]
        present = {node_id for node_id, _, _ in brokers}
        return brokers + [node for node in self._coordinators() if node[0] not in present]

    def _describe_cluster(self, version: int, request: Any) -> dict[str, Any]:
        return {
            "throttle_time": 0, "error_code": 0, "error_message": None,
            "endpoint_type": getattr(request, "endpoint_type", 1),
            "cluster_id": self._known.cluster_id or "", "controller_id": NO_CONTROLLER,
            "brokers": [{"broker_id": n, "host": h, "port": p, "rack": None, "is_fenced": False}
                        for n, h, p in self._brokers()],
            "cluster_authorized_operations": NOT_REQUESTED,
        }

    def _metadata(self, version: int, request: Any) -> dict[str, Any] | None:
        brokers = self._brokers()
        catalog = self._known.catalog
        read = bool(self._known.brokers)  # a Metadata answer always names a broker
        requested = request.topics
        if requested is None or (version == 0 and not requested):
            if read and not self._reveal_topics:
                return None
            topics = [self._topic(t) for t in catalog] if self._reveal_topics else []
        else:
            described = [self._named(catalog, entry, read) for entry in requested]
            if any(t is None for t in described):
                return None
            topics = [t for t in described if t is not None]
        return {
            "throttle_time": 0,
            "brokers": [{"node_id": n, "host": h, "port": p, "rack": None} for n, h, p in brokers],
            "cluster_id": self._known.cluster_id,
            "controller_id": NO_CONTROLLER,
            "topics": topics,
            "error_code": 0,
            "cluster_authorized_operations": NOT_REQUESTED,
        }

    def _named(self, catalog: Any, entry: Any, read: bool) -> dict[str, Any] | None:
        """The topic described, or None when it cannot be and the upstream has been read (see the
        module: the request is then not answered)."""
        name = entry.name
        topic_id = getattr(entry, "topic_id", None)
        topic = catalog.get(name) if name is not None else catalog.by_id(topic_id) if topic_id is not None else None
        if topic is None or not self._reveal_topics:
            if read:
                return None
            return {"error_code": ErrorCode.LEADER_NOT_AVAILABLE, "name": name,
                    "topic_id": topic_id or _ZERO_UUID, "partitions": [],
                    "topic_authorized_operations": NOT_REQUESTED}
        return self._topic(topic)

    @staticmethod
    def _topic(topic: Topic) -> dict[str, Any]:
        return {
            "error_code": 0, "name": topic.name, "topic_id": topic.topic_id, "is_internal": topic.is_internal,
            "partitions": [{"error_code": ErrorCode.LEADER_NOT_AVAILABLE, "partition_index": index, "leader_id": -1,
                            "leader_epoch": -1, "replica_nodes": (), "isr_nodes": (), "offline_replicas": ()}
                           for index in range(topic.num_partitions)],
            "topic_authorized_operations": NOT_REQUESTED,
        }

    # -- data requests ------------------------------------------------------------------------
    @staticmethod
    def _produce(version: int, request: Any) -> dict[str, Any]:
        return {"throttle_time": 0, "responses": [
            {"name": getattr(t, "name", None), "topic_id": getattr(t, "topic_id", None) or _ZERO_UUID,
             "partition_responses": [
                 {"index": p.index, "error_code": ErrorCode.NOT_LEADER_OR_FOLLOWER, "base_offset": -1,
                  "log_append_time": None, "log_start_offset": -1, "record_errors": (), "error_message": None,
                  "current_leader": {"leader_id": -1, "leader_epoch": -1}}
                 for p in t.partition_data]}
            for t in request.topic_data]}

    @staticmethod
    def _fetch(version: int, request: Any) -> dict[str, Any]:
        if getattr(request, "session_id", 0):
            return {"throttle_time": 0, "error_code": ErrorCode.FETCH_SESSION_ID_NOT_FOUND, "session_id": 0,
                    "responses": []}
        return {"throttle_time": 0, "error_code": 0, "session_id": 0, "responses": [
            {"topic": getattr(t, "topic", None), "topic_id": getattr(t, "topic_id", None) or _ZERO_UUID,
             "partitions": [
                 {"partition_index": p.partition, "error_code": ErrorCode.NOT_LEADER_OR_FOLLOWER,
                  "high_watermark": -1, "last_stable_offset": -1, "log_start_offset": -1,
                  "diverging_epoch": {"epoch": -1, "end_offset": -1},
                  "current_leader": {"leader_id": -1, "leader_epoch": -1},
                  "snapshot_id": {"end_offset": -1, "epoch": -1}, "preferred_read_replica": -1,
                  "records": b""}  # empty, not null: librdkafka refuses a null record set
                 for p in t.partitions]}
            for t in request.topics]}

    @staticmethod
    def _list_offsets(version: int, request: Any) -> dict[str, Any]:
        return {"throttle_time": 0, "topics": [
            {"name": t.name, "partitions": [
                {"partition_index": p.partition_index, "error_code": ErrorCode.NOT_LEADER_OR_FOLLOWER,
                 "timestamp": -1, "offset": -1, "leader_epoch": -1} for p in t.partitions]}
            for t in request.topics]}

    @staticmethod
    def _init_producer_id(version: int, request: Any) -> dict[str, Any]:
        # A transactional id's coordinator is a partition leader upstream: not available. Without
        # one a broker hands out ids from a block the controller gave it: still loading.
        code = ErrorCode.COORDINATOR_NOT_AVAILABLE if request.transactional_id else ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return {"throttle_time": 0, "error_code": code, "producer_id": -1, "producer_epoch": -1,
                "ongoing_txn_producer_id": -1, "ongoing_txn_producer_epoch": -1}

    @staticmethod
    def _offset_for_leader_epoch(version: int, request: Any) -> dict[str, Any]:
        return {"throttle_time": 0, "topics": [
            {"topic": t.topic, "partitions": [
                {"partition": p.partition, "error_code": ErrorCode.NOT_LEADER_OR_FOLLOWER, "leader_epoch": -1,
                 "end_offset": -1} for p in t.partitions]}
            for t in request.topics]}
