"""Rewriting the responses that carry broker endpoints, so no upstream address reaches a client.

- Metadata: every broker becomes our listener for it (advertised host, `sidecar.listener.base.port`
  + node id), and the coordinator's own nodes (one per shard, `coordinator.shards`) are added when
  absent (clients see them as brokers, as a Kafka group coordinator is one). The answer depends only
  on the configuration and the upstream, so every shard rewrites alike.
- DescribeCluster: the same, for the `brokers` list.
- Produce v10+ and Fetch v16+: the `NodeEndpoints` leader hints (KIP-951).
- FindCoordinator for transaction keys is answered by `find_coordinator` in this package.

A Metadata answer's topics are also told to `seen` (the sidecar's catalog refreshes when one is
new to it, `cluster.UpstreamCluster.saw`). Everything else passes through untouched. A response
that cannot be decoded is an upstream fault (`UpstreamProtocolError`): the client connection is
closed rather than handed bytes we cannot vouch for.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

from protocol.codec import encode_response

from .wire import decode_response, set_correlation_id, top_level_tags

PRODUCE, FETCH, METADATA, DESCRIBE_CLUSTER = 0, 1, 3, 60
NODE_ENDPOINTS_TAG = 0

TopicsSeen = Callable[[Iterator[tuple[str, uuid.UUID | None, int]]], None]
"""Told the topics a Metadata answer describes: name, id (None before v10), partition count."""


class Endpoints(Protocol):
    """Where clients reach each node, and the coordinator's own nodes (shard 0 first)."""

    def address(self, node_id: int) -> tuple[str, int]: ...

    @property
    def coordinators(self) -> Sequence[tuple[int, str, int]]: ...


def needs_rewrite(api_key: int, version: int) -> bool:
    return (api_key in (METADATA, DESCRIBE_CLUSTER) or (api_key == PRODUCE and version >= 10)
            or (api_key == FETCH and version >= 16))


def rewrite(api_key: int, version: int, body: bytearray, correlation_id: int, endpoints: Endpoints,
            seen: TopicsSeen | None = None) -> bytes | bytearray:
    """The framed response for the client: rewritten when it carries endpoints. Produce and Fetch
    are decoded only when their top-level tagged fields hold the leader hints (tag 0)."""
    if api_key in (PRODUCE, FETCH):
        tags = top_level_tags(api_key, version, body)
        if tags is not None and NODE_ENDPOINTS_TAG not in tags:
            return set_correlation_id(body, correlation_id)
    response = decode_response(api_key, version, body)
    if api_key == METADATA and seen is not None:
        seen(_described(response))
    rewritten = _REWRITERS[api_key](response, endpoints)
    if rewritten is None:
        return set_correlation_id(body, correlation_id)
    return encode_response(correlation_id, rewritten)


def _metadata(response: Any, endpoints: Endpoints) -> Any:
    brokers = [dataclasses.replace(b, host=h, port=p)
               for b in response.brokers for h, p in [endpoints.address(int(b.node_id))]]
    if brokers:
        present = {int(b.node_id) for b in brokers}
        brokers += [_like(response.brokers[0], node_id=node_id, host=host, port=port)
                    for node_id, host, port in endpoints.coordinators if node_id not in present]
    return dataclasses.replace(response, brokers=tuple(brokers))


def _described(response: Any) -> Iterator[tuple[str, uuid.UUID | None, int]]:
    """The topics a Metadata answer describes (an error at topic level describes none)."""
    for t in response.topics:
        if not t.error_code and t.name is not None:
            yield str(t.name), getattr(t, "topic_id", None), len(t.partitions)


def _like(entry: Any, **values: Any) -> Any:
    """Another entry of the same (version's) class: the given fields, rack (where the version
    has one) none."""
    fields = {f.name for f in dataclasses.fields(entry)}
    if "rack" in fields:
        values["rack"] = None
    for name in ("node_id", "broker_id"):
        if name in values:
            values[name] = type(getattr(entry, name))(values[name])
    return dataclasses.replace(entry, **values)


def _describe_cluster(response: Any, endpoints: Endpoints) -> Any:
    if not response.brokers:
        return None
    brokers = [dataclasses.replace(b, host=h, port=p)
               for b in response.brokers for h, p in [endpoints.address(int(b.broker_id))]]
    present = {int(b.broker_id) for b in brokers}
    brokers += [_like(response.brokers[0], broker_id=node_id, host=host, port=port)
                for node_id, host, port in endpoints.coordinators if node_id not in present]
    return dataclasses.replace(response, brokers=tuple(brokers))


def _leader_hints(response: Any, endpoints: Endpoints) -> Any:
    hints = getattr(response, "node_endpoints", ())
    if not hints:
        return None
    return dataclasses.replace(response, node_endpoints=tuple(
        dataclasses.replace(e, host=h, port=p) for e in hints for h, p in [endpoints.address(int(e.node_id))]))


_REWRITERS: dict[int, Callable[[Any, Endpoints], Any]] = {
    METADATA: _metadata,
    DESCRIBE_CLUSTER: _describe_cluster,
    PRODUCE: _leader_hints,
    FETCH: _leader_hints,
}
