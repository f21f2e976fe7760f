"""The record source of sidecar mode: share partitions read from the upstream cluster's leaders.

The upstream needs no share-group support: a share partition's records are read with a plain
Fetch (by topic name, sessionless, the highest version of 4-12 the upstream serves: v4 brought
``read_committed``) ``read_committed`` from the partition's leader, over the
sidecar's own upstream connections (``UpstreamCluster.client``, so its TLS/SASL settings hold). The
leader comes from a Metadata of that topic, remembered until a read says it moved.

- The broker answers only below the last stable offset and lists the aborted transactions
  overlapping what it returned; each batch's aborted flag follows from them (``source.mark_aborted``).
- Any other error of the partition (NOT_LEADER_OR_FOLLOWER, FENCED/UNKNOWN_LEADER_EPOCH,
  UNKNOWN_TOPIC_OR_PARTITION, a storage error...), or a connection that fails or times out: the leader
  is forgotten, the sidecar's cluster view is asked to refresh, and the read fails with
  :class:`~.source.SourceUnavailable` carrying Kafka's code (LEADER_NOT_AVAILABLE when the
  upstream could not be reached): retriable, one line, no traceback. The next read looks the
  leader up again.
- OFFSET_OUT_OF_RANGE: ListOffsets (earliest) tells where the log starts now, and the read fails
  with :class:`~.source.OffsetOutOfRange`.

Two more things the sidecar's share path asks of the upstream: a partition's offset by ListOffsets
(earliest, latest, or by timestamp: where a new share partition starts, ``starts``), and the wait
for an append (ShareFetch's ``MaxWaitMs``, :meth:`UpstreamSource.wait_for_append`). The upstream
tells nobody of an append, and a long-poll Fetch would hold the one connection to the leader that
every read shares (a broker answers a connection's requests in order), so the source asks again:
one poller for all waiting requests, which every ``APPEND_POLL_S`` reads one byte of each watched
partition at the last stable offset its last read saw, and wakes the requests waiting on a
partition whose last stable offset moved past the one they saw. So the upstream gets at most one
such read per watched partition per interval, however many consumers wait. A partition never read
yet is not waited for; one that cannot be read wakes its waiters (their next read answers the error).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from protocol.build import build
from protocol.client import request_class
from protocol.errors import ErrorCode

from ..sidecar.wire import ForwardError, UpstreamProtocolError
from .source import (
    CorruptBatch,
    OffsetOutOfRange,
    PartitionRead,
    PartitionRef,
    SourceUnavailable,
    mark_aborted,
    split_batches,
)

FETCH, LIST_OFFSETS, METADATA = 1, 2, 3
# (lowest, highest) version sent, the highest both sides speak: Fetch v4 brought isolation_level and
# aborted_transactions; v13+ names topics by id, so v12 is the newest by name.
FETCH_VERSIONS = (4, 12)
LIST_OFFSETS_VERSIONS = (2, 7)
METADATA_VERSIONS = (1, 12)
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
EARLIEST, LATEST = -2, -1
APPEND_POLL_S = 0.05


class LeaderClient(Protocol):
    async def call_node(self, node_id: int, api_key: int, request: Any) -> Any: ...
    async def call_any(self, api_key: int, request: Any) -> tuple[Any, str]: ...


class Leaders(Protocol):
    """What the source reads of a cluster: the sidecar's ``UpstreamCluster``, or an embedded
    shard k's stand-in naming shard 0 as every partition's leader (``shard_zero``)."""

    @property
    def client(self) -> LeaderClient: ...
    @property
    def brokers(self) -> Mapping[int, tuple[str, int]]: ...
    def version_for(self, api_key: int, highest: int, lowest: int = 0) -> int | None: ...
    def request_refresh(self) -> None: ...


class UpstreamSource:
    """A :class:`~.source.RecordSource` over the upstream cluster the sidecar fronts (or shard 0's
    data plane, for an embedded shard k >= 1: ``shard_zero``)."""

    def __init__(self, cluster: Leaders) -> None:
        self.cluster = cluster
        self._leaders: dict[tuple[str, int], int] = {}
        self._stable: dict[PartitionRef, int] = {}  # the last stable offset each partition's last read saw
        # requests waiting for an append: per partition, each one's future and the offset it saw
        self._waiting: dict[PartitionRef, dict[asyncio.Future[None], int]] = {}
        self._poller: asyncio.Task[None] | None = None

    def last_stable(self, ref: PartitionRef) -> int | None:
        """The last stable offset the partition's last read saw (None before its first read)."""
        return self._stable.get(ref)

    def read_now(self, ref: PartitionRef, offset: int, max_bytes: int) -> None:
        """Never at once: every read is a round trip to the partition's leader."""
        return None

    async def read(self, ref: PartitionRef, offset: int, max_bytes: int) -> PartitionRead:
        max_bytes = max(max_bytes, 1)
        data = await self._call_leader(ref, FETCH, FETCH_VERSIONS, {
            "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": max_bytes,
            "isolation_level": READ_COMMITTED, "session_id": 0, "session_epoch": -1, "rack_id": "",
            "forgotten_topics_data": [],
            "topics": [{"topic": ref.topic, "partitions": [{
                "partition": ref.partition, "current_leader_epoch": -1, "fetch_offset": offset,
                "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": max_bytes}]}]})
        top = int(getattr(data, "error_code", 0))  # v7+
        if top:
            raise self._unavailable(ref, ErrorCode(top), "Fetch")
        part = data.responses[0].partitions[0]
        code = ErrorCode(int(part.error_code))
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            raise OffsetOutOfRange(offset, await self._log_start(ref))
        if code != ErrorCode.NONE:
            raise self._unavailable(ref, code, f"Fetch at {offset}")
        aborted = [(int(a.producer_id), int(a.first_offset)) for a in (part.aborted_transactions or ())]
        try:
            raws = [raw for raw in split_batches(part.records or b"") if raw[1] >= offset]
        except CorruptBatch as exc:
            raise SourceUnavailable(ErrorCode.CORRUPT_MESSAGE, f"{ref.topic}-{ref.partition}: {exc}") from exc
        log_start = int(getattr(part, "log_start_offset", -1))  # v5+
        self._stable[ref] = int(part.last_stable_offset)
        return PartitionRead(mark_aborted(raws, aborted), log_start, int(part.high_watermark),
                             int(part.last_stable_offset))

    async def wait_for_append(self, refs: Sequence[PartitionRef], timeout_s: float) -> None:
        """Return once one of ``refs`` has a last stable offset past the one its last read saw, or
        after ``timeout_s``."""
        watched = [ref for ref in refs if ref in self._stable]
        if not watched:
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for ref in watched:
            self._waiting.setdefault(ref, {})[waiter] = self._stable[ref]
        if self._poller is None or self._poller.done():
            self._poller = asyncio.get_running_loop().create_task(self._poll(), name="share-upstream-appends")
        try:
            await asyncio.wait((waiter,), timeout=timeout_s)
        finally:
            for ref in watched:
                waiting = self._waiting.get(ref)
                if waiting is not None:
                    waiting.pop(waiter, None)
                    if not waiting:
                        del self._waiting[ref]
            if not waiter.done():
                waiter.cancel()

    async def _poll(self) -> None:
        while self._waiting:
            await asyncio.sleep(APPEND_POLL_S)
            for ref in list(self._waiting):
                if not self._waiting.get(ref):
                    continue
                stable = self._stable.get(ref)
                if stable is None or self._wake(ref, stable):  # forgotten (unreadable), or another read moved it
                    self._wake(ref, stable)
                    continue
                try:
                    await self.read(ref, stable, 1)  # moves ``_stable`` on when something was appended
                except (SourceUnavailable, OffsetOutOfRange):
                    self._wake(ref, None)
                    continue
                self._wake(ref, self._stable.get(ref))

    def _wake(self, ref: PartitionRef, stable: int | None) -> bool:
        """Wake the requests waiting on ``ref`` that saw an offset below ``stable`` (all of them when
        None: it cannot be read now). True when any was."""
        woken = False
        for waiter, seen in list(self._waiting.get(ref, {}).items()):
            if stable is None or seen < stable:
                if not waiter.done():
                    waiter.set_result(None)
                woken = True
        return woken

    async def offset_for(self, ref: PartitionRef, timestamp: int, committed: bool = False) -> int:
        """ListOffsets of one partition at its leader: ``EARLIEST`` (-2), ``LATEST`` (-1: the high
        watermark, or the last stable offset when ``committed``) or the first offset whose record
        is at or after a timestamp (-1 when none is)."""
        data = await self._call_leader(ref, LIST_OFFSETS, LIST_OFFSETS_VERSIONS, {
            "replica_id": -1, "isolation_level": READ_COMMITTED if committed else READ_UNCOMMITTED,
            "topics": [{"name": ref.topic, "partitions": [{
                "partition_index": ref.partition, "current_leader_epoch": -1, "timestamp": timestamp}]}]})
        part = data.topics[0].partitions[0]
        code = ErrorCode(int(part.error_code))
        if code != ErrorCode.NONE:
            raise self._unavailable(ref, code, "ListOffsets")
        return int(part.offset)

    async def _log_start(self, ref: PartitionRef) -> int:
        return await self.offset_for(ref, EARLIEST)

    def _version(self, ref: PartitionRef, api_key: int, versions: tuple[int, int]) -> int:
        version = self.cluster.version_for(api_key, versions[1], versions[0])
        if version is None:
            raise SourceUnavailable(ErrorCode.UNSUPPORTED_VERSION, f"{ref.topic}-{ref.partition}: the upstream "
                                    f"serves no version {versions[0]}-{versions[1]} of API {api_key}")
        return version

    async def _call_leader(self, ref: PartitionRef, api_key: int, versions: tuple[int, int],
                           fields: dict[str, Any]) -> Any:
        version = self._version(ref, api_key, versions)
        leader = await self._leader(ref)
        try:
            return await self.cluster.client.call_node(leader, api_key, build(request_class(api_key, version), fields))
        except (TimeoutError, ForwardError, UpstreamProtocolError) as exc:
            raise self._unavailable(ref, ErrorCode.LEADER_NOT_AVAILABLE, str(exc) or "timed out") from None

    async def _leader(self, ref: PartitionRef) -> int:
        leader = self._leaders.get((ref.topic, ref.partition))
        if leader is not None and leader in self.cluster.brokers:
            return leader
        try:
            response, _ = await self.cluster.client.call_any(METADATA, build(
                request_class(METADATA, self._version(ref, METADATA, METADATA_VERSIONS)),
                {"topics": [{"name": ref.topic}], "allow_auto_topic_creation": False}))
        except (TimeoutError, ForwardError, UpstreamProtocolError) as exc:
            raise self._unavailable(ref, ErrorCode.LEADER_NOT_AVAILABLE, str(exc) or "timed out") from None
        for topic in response.topics:
            if topic.name != ref.topic:
                continue
            if topic.error_code:
                raise self._unavailable(ref, ErrorCode(int(topic.error_code)), "Metadata")
            for p in topic.partitions:
                if int(p.partition_index) == ref.partition and int(p.leader_id) >= 0:
                    leader = int(p.leader_id)
                    if leader not in self.cluster.brokers:  # a broker the sidecar has not read yet
                        raise self._unavailable(ref, ErrorCode.LEADER_NOT_AVAILABLE, f"leader {leader} not known yet")
                    self._leaders[(ref.topic, ref.partition)] = leader
                    return leader
        raise self._unavailable(ref, ErrorCode.LEADER_NOT_AVAILABLE, "no leader")

    def _unavailable(self, ref: PartitionRef, code: ErrorCode, detail: str) -> SourceUnavailable:
        """Forget the leader and ask the cluster view to refresh: the next read looks again."""
        self._leaders.pop((ref.topic, ref.partition), None)
        self._stable.pop(ref, None)
        self.cluster.request_refresh()
        return SourceUnavailable(code, f"{ref.topic}-{ref.partition}: {detail}")
