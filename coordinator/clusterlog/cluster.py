"""The upstream cluster as the log sees it: who leads each partition of the log topic, who
coordinates each transactional id, and one call to either.

Built on the sidecar's own upstream client (`sidecar.upstream.UpstreamClient`: one connection per
broker, the upstream's TLS and SASL settings). Leaders and coordinators are looked up when first
needed and forgotten when a call says they moved (NOT_LEADER_OR_FOLLOWER, NOT_COORDINATOR, a lost
connection), so the next call looks again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from protocol.build import build
from protocol.client import request_class
from protocol.errors import ErrorCode

from ..security.upstream import UpstreamSecurity
from ..sidecar.upstream import Address, UpstreamClient
from ..sidecar.wire import ForwardError, UpstreamProtocolError

METADATA, FIND_COORDINATOR = 3, 10
GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE = 0, 1
_COORDINATOR_PENDING = frozenset({ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS})


class LogUnavailable(Exception):
    """The log cannot be reached right now (upstream down, no leader, coordinator moving): retriable."""


@dataclass(frozen=True, slots=True)
class TopicLayout:
    name: str
    partitions: int
    leaders: dict[int, int]
    """partition → leader node id (-1 while it has none)."""


class LogCluster:
    """Calls to the brokers that matter to the log: partition leaders and transaction coordinators."""

    def __init__(self, bootstrap: Sequence[Address], security: UpstreamSecurity | None = None,
                 timeout_s: float = 10.0, retry_for_s: float = 30.0) -> None:
        self.retry_for_s = retry_for_s
        self.brokers: dict[int, Address] = {}
        self._client = UpstreamClient(bootstrap, self.brokers.get, timeout_s, security)
        self._leaders: dict[tuple[str, int], int] = {}
        self._coordinators: dict[tuple[int, str], int] = {}

    async def call_any(self, api_key: int, version: int, fields: dict[str, Any]) -> Any:
        try:
            response, _ = await self._client.call_any(api_key, build(request_class(api_key, version), fields))
        except (ForwardError, UpstreamProtocolError) as exc:
            raise LogUnavailable(str(exc)) from exc
        return response

    async def call_node(self, node_id: int, api_key: int, version: int, fields: dict[str, Any]) -> Any:
        try:
            return await self._client.call_node(node_id, api_key, build(request_class(api_key, version), fields))
        except (ForwardError, UpstreamProtocolError) as exc:
            raise LogUnavailable(str(exc)) from exc

    async def describe(self, topic: str) -> TopicLayout | None:
        """The topic's partitions and leaders (None when the cluster has no such topic); refreshes
        the broker table on the way."""
        response = await self.call_any(METADATA, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False})
        self.brokers.clear()
        self.brokers.update({int(b.node_id): (str(b.host), int(b.port)) for b in response.brokers})
        for t in response.topics:
            if t.name != topic:
                continue
            if t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                return None
            if t.error_code:
                raise LogUnavailable(f"Metadata for {topic}: {ErrorCode(int(t.error_code)).name}")
            leaders = {int(p.partition_index): int(p.leader_id) for p in t.partitions}
            for partition, leader in leaders.items():
                self._leaders[(topic, partition)] = leader
            return TopicLayout(topic, len(leaders), leaders)
        return None

    async def call_leader(self, topic: str, partition: int, api_key: int, version: int,
                          fields: dict[str, Any]) -> Any:
        leader = self._leaders.get((topic, partition), -1)
        if leader < 0 or leader not in self.brokers:
            await self.describe(topic)
            leader = self._leaders.get((topic, partition), -1)
            if leader < 0:
                raise LogUnavailable(f"{topic}-{partition} has no leader")
        try:
            return await self.call_node(leader, api_key, version, fields)
        except LogUnavailable:
            self.forget_leader(topic, partition)
            raise

    def forget_leader(self, topic: str, partition: int) -> None:
        self._leaders.pop((topic, partition), None)

    async def call_coordinator(self, key: str, api_key: int, version: int, fields: dict[str, Any],
                               key_type: int = TRANSACTION_KEY_TYPE) -> Any:
        """A call to the coordinator of a transactional id (or, with GROUP_KEY_TYPE, of a group)."""
        node = self._coordinators.get((key_type, key))
        if node is None:
            node = self._coordinators[(key_type, key)] = await self._find_coordinator(key, key_type)
        try:
            return await self.call_node(node, api_key, version, fields)
        except LogUnavailable:
            self.forget_coordinator(key, key_type)
            raise

    async def _find_coordinator(self, key: str, key_type: int) -> int:
        # The first transactional id (or group) of a cluster creates `__transaction_state` (or
        # `__consumer_offsets`): until its partitions have leaders the answer is
        # COORDINATOR_NOT_AVAILABLE, which is worth waiting for.
        deadline = time.monotonic() + self.retry_for_s
        delay = 0.05
        while True:
            response = await self.call_any(FIND_COORDINATOR, 3, {"key": key, "key_type": key_type})
            code = ErrorCode(int(response.error_code))
            if code == ErrorCode.NONE:
                node = int(response.node_id)
                self.brokers.setdefault(node, (str(response.host), int(response.port)))
                return node
            if code not in _COORDINATOR_PENDING or time.monotonic() > deadline:
                raise LogUnavailable(f"FindCoordinator for {key}: {code.name}")
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.5)

    def forget_coordinator(self, key: str, key_type: int = TRANSACTION_KEY_TYPE) -> None:
        self._coordinators.pop((key_type, key), None)

    def close(self) -> None:
        self._client.close()
