"""Drives the data plane handlers the way the server does: kio request entity -> framed bytes ->
`RequestCodec` -> handler -> kio response -> bytes -> decoded response."""

from __future__ import annotations

import inspect
import io
import itertools
import uuid
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from coordinator.api.registry import ApiRegistry, RequestContext
from coordinator.catalog.catalog import Topic, TopicCatalog
from coordinator.dataplane import DataPlaneConfig, PartitionStore, dataplane_handlers
from coordinator.dataplane.session import FetchSessionCache
from protocol.build import build
from protocol.client import encode_request
from protocol.codec import RequestCodec

from .records import NOW_MS

PRODUCE, FETCH, LIST_OFFSETS = 0, 1, 2


class ManualClock:
    def __init__(self, now_ms: int = NOW_MS) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, ms: int) -> None:
        self.now_ms += ms


class Harness:
    def __init__(
        self, config: DataPlaneConfig | None = None, *, catalog: TopicCatalog | None = None, **store_kwargs: Any
    ) -> None:
        """`fs=` (with `flush_policy=`...) runs the store on that filesystem, opened (recovered)
        here; pass the `catalog` of an earlier harness to restart over the same topics."""
        self.config = config or DataPlaneConfig()
        self.clock = ManualClock()
        ids = itertools.count(1)
        self.catalog = catalog or TopicCatalog(None, id_factory=lambda: uuid.UUID(int=next(ids)))
        self.store = PartitionStore(self.catalog, self.config, clock_ms=self.clock, **store_kwargs)
        if "fs" in store_kwargs:
            self.store.open()
        session_ids = itertools.count(1001)
        self.sessions = FetchSessionCache(
            self.config.max_incremental_fetch_session_cache_slots,
            self.config.fetch_session_eviction_ms,
            id_factory=lambda: next(session_ids),
        )
        self.registry = ApiRegistry(
            dataplane_handlers(self.catalog, self.store, self.config, sessions=self.sessions)
        )
        self.codec = RequestCodec(self.registry.version_ranges())
        self._correlation = itertools.count(1)

    def create(self, name: str, partitions: int = 1, **configs: str) -> Topic:
        return self.catalog.create(name, partitions, {k.replace("_", "."): v for k, v in configs.items()})

    async def call(self, api_key: int, version: int, description: dict[str, Any]) -> Any:
        """Send a request built from `description`; the decoded response (None = no response)."""
        request = build(load_request_schema(api_key, version), description)
        frame = encode_request(api_key, next(self._correlation), "test-client", request)
        decoded = self.codec.decode(frame[4:])
        ctx = RequestContext(1, decoded.client_id, "127.0.0.1", api_key, version, decoded.correlation_id)
        handler = self.registry.get(api_key)
        assert handler is not None
        result = handler.handle(ctx, decoded.body)
        if inspect.isawaitable(result):
            result = await result
        if result is None:
            return None
        cls = load_response_schema(api_key, version)
        assert type(result) is cls
        buffer = io.BytesIO()
        entity_writer(cls)(buffer, result)
        decoded_response, size = entity_reader(cls)(buffer.getvalue(), 0)
        assert size == len(buffer.getvalue())
        return decoded_response

    async def produce(
        self, topic: str, partition: int, records: bytes | None, *, version: int = 11, acks: int = -1
    ) -> Any:
        response = await self.call(
            PRODUCE,
            version,
            {
                "acks": acks,
                "timeout": 1000,
                "topic_data": [
                    {"name": topic, "partition_data": [{"index": partition, "records": records}]}
                ],
            },
        )
        if response is None:
            return None
        return response.responses[0].partition_responses[0]

    async def list_offset(
        self, topic: str, partition: int, timestamp: int, *, version: int = 10, leader_epoch: int = -1
    ) -> Any:
        response = await self.call(
            LIST_OFFSETS,
            version,
            {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": [
                    {
                        "name": topic,
                        "partitions": [
                            {
                                "partition_index": partition,
                                "timestamp": timestamp,
                                "current_leader_epoch": leader_epoch,
                            }
                        ],
                    }
                ],
            },
        )
        return response.topics[0].partitions[0]

    async def fetch(
        self,
        partitions: list[tuple[str, int, int]] | None = None,
        *,
        version: int = 12,
        max_wait_ms: int = 0,
        min_bytes: int = 1,
        max_bytes: int = 50 * 1024 * 1024,
        partition_max_bytes: int = 1024 * 1024,
        session_id: int = 0,
        session_epoch: int = -1,
        forgotten: list[tuple[str, int]] = (),  # type: ignore[assignment]
        isolation_level: int = 0,
        leader_epoch: int = -1,
    ) -> Any:
        """Fetch [(topic, partition, offset)]; topics are sent by id from v13."""
        return await self.call(
            FETCH,
            version,
            {
                "replica_id": -1,
                "max_wait": max_wait_ms,
                "min_bytes": min_bytes,
                "max_bytes": max_bytes,
                "isolation_level": isolation_level,
                "session_id": session_id,
                "session_epoch": session_epoch,
                "topics": self._fetch_topics(partitions or [], version, partition_max_bytes, leader_epoch),
                "forgotten_topics_data": [
                    {**self._topic_field(name, version), "partitions": [p]} for name, p in forgotten
                ],
            },
        )

    def partitions(self, fetch_response: Any) -> dict[tuple[str, int], Any]:
        """{(topic name, partition): partition data} of a decoded Fetch response, any version."""
        out = {}
        for topic in fetch_response.responses:
            name = getattr(topic, "topic", None)
            if name is None:
                known = self.catalog.by_id(topic.topic_id)
                name = known.name if known is not None else str(topic.topic_id)
            for partition in topic.partitions:
                out[(name, partition.partition_index)] = partition
        return out

    def _topic_field(self, name: str, version: int) -> dict[str, Any]:
        if version >= 13:
            topic = self.catalog.get(name)
            return {"topic_id": topic.topic_id if topic is not None else uuid.UUID(int=999)}
        return {"topic": name}

    def _fetch_topics(
        self, partitions: list[tuple[str, int, int]], version: int, max_bytes: int, epoch: int
    ) -> list[dict[str, Any]]:
        topics: list[dict[str, Any]] = []
        for name, partition, offset in partitions:
            entry = {
                "partition": partition,
                "fetch_offset": offset,
                "partition_max_bytes": max_bytes,
                "current_leader_epoch": epoch,
            }
            if topics and topics[-1]["_name"] == name:
                topics[-1]["partitions"].append(entry)
            else:
                topics.append({"_name": name, **self._topic_field(name, version), "partitions": [entry]})
        return topics
