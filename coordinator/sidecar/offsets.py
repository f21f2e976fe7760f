"""Offsets come in with the user and leave with the user: import from and mirror to the upstream.

Import (once per group): the first JoinGroup, ConsumerGroupHeartbeat, StreamsGroupHeartbeat,
OffsetCommit or OffsetFetch naming a group this process has not checked yet waits while the bridge asks the core whether the
group has committed offsets here. If it has none, the upstream's committed offsets for the group
(FindCoordinator, then OffsetFetch naming every partition of every upstream topic, to the
upstream's group coordinator) are committed here as a
simple commit (generation -1, empty member id) through the core, so they are records in the log
before the waiting request (and any OffsetFetch) is answered. Upstream trouble is retried with
backoff and a (rate-limited) log line; the group's requests wait meanwhile (clients time out and
retry as with a coordinator still loading). While the upstream is unreachable, a request that would
wait for an import is answered COORDINATOR_LOAD_IN_PROGRESS at once instead (its handler's
`refuse`). Other groups are never held up. With several shards only the groups this shard
coordinates are imported (`owns`); a request for another shard's group goes on to its
NOT_COORDINATOR answer without touching the upstream.

Mirror (after the fact): every `OffsetsCommitted` event marks its group dirty. Every
`upstream.offsets.mirror.interval.ms` the bridge reads each dirty group's offsets from the core (an
OffsetFetch, answered only with durable state) and sends what changed since the last mirror to the
upstream as a simple OffsetCommit of the same group id (the group is empty upstream, so Kafka accepts
it). A failure keeps the group dirty for the next round and is counted (and logged, rate-limited);
while the upstream is unreachable no round is tried; a client's commit never
waits for the mirror. `coordinator_sidecar_offset_mirror_lag_seconds` is the age of the oldest
commit not yet mirrored.

Deletions are mirrored too, so that removing the sidecar never brings back what a user deleted:
the partitions an OffsetDelete answered here deleted, and the groups a DeleteGroups deleted, are
deleted upstream (OffsetDelete, DeleteGroups to the upstream's group coordinator) in the group's
next mirror round, before its commits (a group deleted and used again is deleted upstream, then
gets its new offsets). Both APIs go through the import gate first, so deleting a group that so far
exists only upstream imports it, deletes it here and then upstream. An upstream that refuses
(NON_EMPTY_GROUP: someone consumes with that group id directly upstream; GROUP_SUBSCRIBED_TO_TOPIC)
is logged and not retried; GROUP_ID_NOT_FOUND upstream means nothing was left to delete.

A group whose offsets live upstream (it commits transactionally, `txn_offsets`) is neither
imported nor mirrored: its offsets are read from the upstream, and its plain commits are sent there
when they are made (`commit_upstream`); `flush` mirrors one group at once, whatever its home (before
its first transactional commit is forwarded).

Dirty marks and pending deletions are in memory: a coordinator killed before a mirror round
leaves those changes unmirrored until the group's next commit (commits) or for good (deletions).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Awaitable, Callable
from typing import Any

from prometheus_client import Counter, Gauge

from protocol.build import build
from protocol.client import request_class
from protocol.errors import ErrorCode

from ..api.declaration import SidecarRoute
from ..api.registry import ApiHandler, RequestContext, is_pending, response_of
from ..core import requests as core
from ..core.events import OffsetsCommitted
from ..logging import get_logger
from ..runtime.shard import ShardRuntime
from .cluster import UpstreamCluster
from .lograte import RateLimitedLog
from .wire import ForwardError

log = get_logger("coordinator.sidecar.offsets")
limited = RateLimitedLog(log)
"""Retries against an upstream that is away: one line per kind per interval."""

OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR = 8, 9, 10
DELETE_GROUPS, OFFSET_DELETE = 42, 47
NOTHING_UPSTREAM = frozenset({ErrorCode.NONE, ErrorCode.GROUP_ID_NOT_FOUND})
RETRIABLE = frozenset({ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                       ErrorCode.NOT_COORDINATOR})
BACKOFF_S, BACKOFF_MAX_S = 0.1, 5.0

MIRROR_LAG = Gauge("coordinator_sidecar_offset_mirror_lag_seconds",
                   "Age of the oldest committed offset not yet mirrored to the upstream cluster.")
MIRROR_PENDING = Gauge("coordinator_sidecar_offset_mirror_pending_groups",
                       "Groups with commits not yet mirrored to the upstream cluster.")
MIRROR_COMMITS = Counter("coordinator_sidecar_offset_mirror_commits",
                         "Offset commits sent to the upstream cluster, by result.", ["result"])
IMPORTS = Counter("coordinator_sidecar_offset_imports", "Groups checked for upstream offsets, by outcome.",
                  ["outcome"])

Offsets = dict[tuple[str, int], tuple[int, int, str]]  # (topic, partition) -> (offset, leader epoch, metadata)


class OffsetBridge:
    def __init__(self, cluster: UpstreamCluster, shard: Callable[[], ShardRuntime | None], interval_ms: int,
                 owns: Callable[[str], bool] | None = None) -> None:
        self._cluster = cluster
        self._owns = owns
        self._shard = shard
        self._interval_s = interval_ms / 1000
        self._checked: set[str] = set()
        self._imports: dict[str, asyncio.Task[None]] = {}
        self._dirty: dict[str, float] = {}  # group -> when it first had something to mirror
        self._changes: dict[str, int] = {}  # group -> count of changes seen (a round ends a mark only if none came)
        self._mirrored: dict[str, Offsets] = {}
        self._deleted_offsets: dict[str, set[tuple[str, int]]] = {}  # to delete upstream
        self._deleted_groups: set[str] = set()  # to delete upstream
        self._coordinators: dict[str, int] = {}
        self._task: asyncio.Task[None] | None = None
        self.homes: Callable[[ShardRuntime], Awaitable[set[str]]] | None = None
        """The groups whose offsets live upstream (`txn_offsets`): the mirror never sends their
        offsets (a transaction commits them upstream; a plain commit is sent when it is made)."""
        MIRROR_LAG.set_function(self._lag)
        MIRROR_PENDING.set_function(lambda: len(self._dirty))

    # -- import ---------------------------------------------------------------------------------
    def gate(self, handler: ApiHandler) -> ApiHandler:
        """An API declared `SidecarRoute.SERVED_AFTER_IMPORT` waits for the import of the groups its
        placement names (`api/placement.py`)."""
        if handler.sidecar is not SidecarRoute.SERVED_AFTER_IMPORT or handler.placement is None:
            return handler
        inner = handler.handle
        group_ids = handler.placement.group_ids

        def handle(ctx: RequestContext, request: Any) -> Any:
            shard = self._shard()
            if shard is None or not shard.loaded:
                return inner(ctx, request)  # answers COORDINATOR_LOAD_IN_PROGRESS
            pending = [g for g in group_ids(request, ctx.api_version) if g not in self._checked]
            if self._owns is not None:
                pending = [g for g in pending if self._owns(g)]
            if not pending:
                return inner(ctx, request)
            if not self._cluster.reachable and handler.refuse is not None:
                # The import cannot happen now: the group is still loading, as Kafka says of a
                # group whose offsets partition it has not loaded (clients retry).
                return handler.refuse(ctx, request, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
            return self._after_import(shard, pending, lambda: inner(ctx, request))

        return dataclasses.replace(handler, handle=handle)

    async def _after_import(self, shard: ShardRuntime, groups: list[str], then: Callable[[], Any]) -> Any:
        for group_id in groups:
            task = self._imports.get(group_id)
            if task is None:
                task = self._imports[group_id] = asyncio.create_task(self._import(shard, group_id))
            await asyncio.shield(task)
        return await response_of(then())

    async def _import(self, shard: ShardRuntime, group_id: str) -> None:
        try:
            if self.homes is not None and group_id in await self.homes(shard):
                IMPORTS.labels("upstream_home").inc()  # its offsets are read from upstream: nothing to copy
            elif await self._local_offsets(shard, group_id):
                IMPORTS.labels("known_here").inc()
            else:
                upstream = await self._read_upstream(group_id)
                if upstream:
                    await self._commit_here(shard, group_id, upstream)
                else:
                    IMPORTS.labels("none_upstream").inc()
            self._checked.add(group_id)
        finally:
            self._imports.pop(group_id, None)

    async def _read_upstream(self, group_id: str) -> Offsets:
        backoff = BACKOFF_S
        while True:
            try:
                return await self._upstream_offsets(group_id)
            except Exception as exc:  # whatever the upstream did (or sent), retry: never crash on it
                self._coordinators.pop(group_id, None)
                limited.warning("offset_import_retrying", group_id=group_id, upstream=self._cluster.names,
                            error=str(exc) or type(exc).__name__, retry_in_ms=int(backoff * 1000))
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX_S)

    async def _local_offsets(self, shard: ShardRuntime, group_id: str) -> Offsets:
        outcome = shard.submit(core.OffsetFetch(ref=shard.new_ref(), groups=(core.OffsetFetchGroup(group_id),)))
        response = await outcome
        offsets: Offsets = {}
        for group in response.groups:
            for topic in group.topics:
                for p in topic.partitions:
                    if not p.error_code and p.committed_offset >= 0:
                        offsets[(topic.name, p.partition_index)] = (p.committed_offset, p.committed_leader_epoch,
                                                                     p.metadata)
        return offsets

    async def _upstream_offsets(self, group_id: str) -> Offsets:
        version = self._cluster.version_for(OFFSET_FETCH, 7, 2)
        if version is None:
            return {}
        node_id = await self._coordinator(group_id)
        # Every partition of every topic by name rather than "all topics" (null): not every
        # Kafka-compatible broker answers the null form (librdkafka's mock cluster does not).
        topics = [{"name": t.name, "partition_indexes": list(range(t.num_partitions))}
                  for t in self._cluster.catalog if not t.is_internal]
        if not topics:
            return {}
        request = build(request_class(OFFSET_FETCH, version), {"group_id": group_id, "topics": topics})
        try:
            response = await self._cluster.client.call_node(node_id, OFFSET_FETCH, request)
        except ForwardError:
            self._coordinators.pop(group_id, None)
            raise
        code = int(getattr(response, "error_code", 0) or 0)
        if code in RETRIABLE:
            self._coordinators.pop(group_id, None)
            raise _Retriable(f"upstream OffsetFetch error {code}")
        if code == ErrorCode.GROUP_ID_NOT_FOUND:
            return {}
        offsets: Offsets = {}
        for topic in response.topics or ():
            for p in topic.partitions or ():
                if not p.error_code and p.committed_offset >= 0:
                    epoch = int(getattr(p, "committed_leader_epoch", -1))
                    offsets[(str(topic.name), int(p.partition_index))] = (int(p.committed_offset), epoch,
                                                                           p.metadata or "")
        return offsets

    async def _commit_here(self, shard: ShardRuntime, group_id: str, offsets: Offsets) -> None:
        topics: dict[str, list[core.OffsetCommitPartition]] = {}
        for (topic, partition), (offset, epoch, metadata) in sorted(offsets.items()):
            topics.setdefault(topic, []).append(core.OffsetCommitPartition(partition, offset, epoch, metadata))
        outcome = shard.submit(core.OffsetCommit(
            ref=shard.new_ref(), group_id=group_id, generation_id_or_member_epoch=-1, member_id="",
            group_instance_id=None, retention_time_ms=-1,
            topics=tuple(core.OffsetCommitTopic(name, tuple(ps)) for name, ps in topics.items())))
        response = await outcome
        failed = [(t.name, p.partition_index, int(p.error_code)) for t in response.topics for p in t.partitions
                  if p.error_code]
        if failed:
            IMPORTS.labels("refused_here").inc()
            log.warning("offset_import_refused", group_id=group_id, partitions=failed[:10], count=len(failed))
            return
        self._mirrored[group_id] = dict(offsets)
        IMPORTS.labels("imported").inc()
        log.info("offsets_imported", group_id=group_id, partitions=len(offsets), upstream=self._cluster.names)

    async def _coordinator(self, group_id: str) -> int:
        node_id = self._coordinators.get(group_id)
        if node_id is not None:
            return node_id
        version = self._cluster.version_for(FIND_COORDINATOR, 3, 0)
        if version is None:
            raise ForwardError("upstream serves no FindCoordinator version we speak")
        response, _ = await self._cluster.client.call_any(
            FIND_COORDINATOR, build(request_class(FIND_COORDINATOR, version), {"key": group_id, "key_type": 0}))
        if response.error_code:
            raise _Retriable(f"upstream FindCoordinator error {int(response.error_code)}")
        node_id = self._coordinators[group_id] = int(response.node_id)
        if node_id not in self._cluster.brokers:
            self._cluster.brokers[node_id] = (str(response.host), int(response.port))
        return node_id

    async def coordinator_of(self, group_id: str) -> int:
        """The upstream broker coordinating `group_id` (asked once, kept until forgotten)."""
        return await self._coordinator(group_id)

    def forget_coordinator(self, group_id: str) -> None:
        self._coordinators.pop(group_id, None)

    # -- mirror ---------------------------------------------------------------------------------
    def attach(self, shard: ShardRuntime) -> None:
        shard.add_observer(self._observe)
        self._task = asyncio.create_task(self._mirror_loop(shard), name="offset-mirror")

    def _observe(self, event: Any) -> None:
        if event.__class__ is OffsetsCommitted:
            self._changed(event.group_id)

    def _changed(self, group_id: str) -> None:
        self._dirty.setdefault(group_id, time.monotonic())
        self._changes[group_id] = self._changes.get(group_id, 0) + 1

    def watch_deletions(self, handler: ApiHandler) -> ApiHandler:
        """OffsetDelete and DeleteGroups: what the response says was deleted here is queued for
        deletion upstream (the response leaves only once the deletion is durable here)."""
        if handler.api_key not in (OFFSET_DELETE, DELETE_GROUPS):
            return handler
        inner = handler.handle

        def handle(ctx: RequestContext, request: Any) -> Any:
            result = inner(ctx, request)
            if is_pending(result):
                return self._after(ctx.api_key, request, result)
            self._deleted(ctx.api_key, request, result)
            return result

        return dataclasses.replace(handler, handle=handle)

    async def _after(self, api_key: int, request: Any, pending: Any) -> Any:
        response = await response_of(pending)
        self._deleted(api_key, request, response)
        return response

    def _deleted(self, api_key: int, request: Any, response: Any) -> None:
        if api_key == DELETE_GROUPS:
            for result in getattr(response, "results", ()):
                if int(result.error_code) == ErrorCode.NONE:
                    group_id = str(result.group_id)
                    self._deleted_offsets.pop(group_id, None)
                    self._mirrored.pop(group_id, None)
                    self._deleted_groups.add(group_id)
                    self._changed(group_id)
            return
        if int(getattr(response, "error_code", -1)) != ErrorCode.NONE:
            return
        partitions = {(str(t.name), int(p.partition_index)) for t in response.topics for p in t.partitions
                      if int(p.error_code) == ErrorCode.NONE}
        if partitions:
            group_id = str(request.group_id)
            self._deleted_offsets.setdefault(group_id, set()).update(partitions)
            mirrored = self._mirrored.get(group_id, {})
            for tp in partitions:
                mirrored.pop(tp, None)
            self._changed(group_id)

    def _lag(self) -> float:
        return time.monotonic() - min(self._dirty.values()) if self._dirty else 0.0

    async def _mirror_loop(self, shard: ShardRuntime) -> None:
        while True:
            await asyncio.sleep(self._interval_s)
            if not self._dirty or not self._cluster.reachable:  # kept dirty until it is back
                continue
            for group_id in list(self._dirty):
                changes = self._changes.get(group_id)
                try:
                    done = await self._mirror(shard, group_id)
                except Exception as exc:  # whatever the upstream did (or sent): retry next round
                    done = False
                    MIRROR_COMMITS.labels("failed").inc()
                    self._coordinators.pop(group_id, None)
                    limited.warning("offset_mirror_failed", group_id=group_id, upstream=self._cluster.names,
                                error=str(exc) or type(exc).__name__)
                if done and self._changes.get(group_id) == changes:  # nothing new came meanwhile
                    self._dirty.pop(group_id, None)
                    self._changes.pop(group_id, None)

    async def mirror_now(self) -> None:
        """One mirror round now (tests and shutdown)."""
        shard = self._shard()
        if shard is not None:
            for group_id in list(self._dirty):
                if await self._mirror(shard, group_id):
                    self._dirty.pop(group_id, None)

    async def flush(self, shard: ShardRuntime, group_id: str) -> None:
        """Mirror the group now, whatever its home (before its offsets move upstream); raises on
        upstream trouble."""
        changes = self._changes.get(group_id)
        await self._mirror(shard, group_id, force=True)
        if self._changes.get(group_id) == changes:
            self._dirty.pop(group_id, None)
            self._changes.pop(group_id, None)

    async def commit_upstream(self, group_id: str, offsets: list[tuple[str, Any]]) -> None:
        """A plain commit of a group whose offsets live upstream, sent there as a simple commit
        (generation -1). `offsets`: (topic, the request's partition entry)."""
        version = self._cluster.version_for(OFFSET_COMMIT, 8, 2)
        if version is None:
            raise _Retriable("the upstream serves no OffsetCommit version we speak")
        topics: dict[str, list[dict[str, Any]]] = {}
        for topic, p in offsets:
            topics.setdefault(topic, []).append({
                "partition_index": p.partition_index, "committed_offset": p.committed_offset,
                "committed_leader_epoch": getattr(p, "committed_leader_epoch", -1),
                "committed_metadata": p.committed_metadata})
        request = build(request_class(OFFSET_COMMIT, version), {
            "group_id": group_id, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "retention_time": -1, "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()]})
        node_id = await self._coordinator(group_id)
        try:
            response = await self._cluster.client.call_node(node_id, OFFSET_COMMIT, request)
        except ForwardError:
            self._coordinators.pop(group_id, None)
            raise
        errors = {int(p.error_code) for t in response.topics for p in t.partitions if p.error_code}
        if errors:
            self._coordinators.pop(group_id, None)
            raise _Retriable(f"upstream OffsetCommit errors {sorted(errors)}")

    async def _mirror(self, shard: ShardRuntime, group_id: str, force: bool = False) -> bool:
        if group_id in self._deleted_groups:
            await self._delete_upstream(group_id, DELETE_GROUPS, 2, {"groups_names": [group_id]})
            self._deleted_groups.discard(group_id)
        partitions = self._deleted_offsets.get(group_id)
        if partitions:
            taken = set(partitions)
            by_topic: dict[str, list[dict[str, int]]] = {}
            for topic, partition in sorted(taken):
                by_topic.setdefault(topic, []).append({"partition_index": partition})
            await self._delete_upstream(group_id, OFFSET_DELETE, 0, {
                "group_id": group_id, "topics": [{"name": n, "partitions": ps} for n, ps in by_topic.items()]})
            # Deleted again meanwhile: those commits were not mirrored yet (this group's mirror is
            # this call), so upstream they are deleted already.
            left = self._deleted_offsets.get(group_id, set()) - taken
            if left:
                self._deleted_offsets[group_id] = left
            else:
                self._deleted_offsets.pop(group_id, None)
        if not force and self.homes is not None and group_id in await self.homes(shard):
            return True  # its offsets of record are upstream: never overwritten from here
        current = await self._local_offsets(shard, group_id)
        before = self._mirrored.get(group_id, {})
        changed = {tp: v for tp, v in current.items() if before.get(tp) != v}
        if not changed:
            return True
        version = self._cluster.version_for(OFFSET_COMMIT, 8, 2)
        if version is None:
            return True
        topics: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), (offset, epoch, metadata) in sorted(changed.items()):
            topics.setdefault(topic, []).append({"partition_index": partition, "committed_offset": offset,
                                                 "committed_leader_epoch": epoch, "committed_metadata": metadata})
        request = build(request_class(OFFSET_COMMIT, version), {
            "group_id": group_id, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "retention_time": -1, "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()]})
        node_id = await self._coordinator(group_id)
        response = await self._cluster.client.call_node(node_id, OFFSET_COMMIT, request)
        errors = {int(p.error_code) for t in response.topics for p in t.partitions if p.error_code}
        if errors & RETRIABLE:
            raise _Retriable(f"upstream OffsetCommit errors {sorted(errors)}")
        mirrored = self._mirrored.setdefault(group_id, {})
        mirrored.update(changed)
        if errors:
            MIRROR_COMMITS.labels("refused").inc()
            log.warning("offset_mirror_refused", group_id=group_id, errors=sorted(errors))
        else:
            MIRROR_COMMITS.labels("ok").inc()
        return True

    async def _delete_upstream(self, group_id: str, api_key: int, highest: int, description: dict[str, Any]) -> None:
        """DeleteGroups or OffsetDelete of one group, to the upstream's coordinator for it. Raises
        (the round is retried) on a retriable error; a refusal is logged and not retried."""
        version = self._cluster.version_for(api_key, highest)
        if version is None:
            MIRROR_COMMITS.labels("refused").inc()
            log.warning("offset_mirror_refused", group_id=group_id, api_key=api_key,
                        detail="the upstream does not serve this API: the deletion stays here only")
            return
        node_id = await self._coordinator(group_id)
        response = await self._cluster.client.call_node(node_id, api_key, build(request_class(api_key, version),
                                                                              description))
        if api_key == DELETE_GROUPS:
            codes = {int(r.error_code) for r in response.results}
        else:
            codes = {int(response.error_code)} | {int(p.error_code) for t in response.topics for p in t.partitions}
        if codes & RETRIABLE:
            raise _Retriable(f"upstream errors {sorted(codes)}")
        if codes - NOTHING_UPSTREAM:
            MIRROR_COMMITS.labels("refused").inc()
            log.warning("offset_mirror_refused", group_id=group_id, api_key=api_key, errors=sorted(codes - NOTHING_UPSTREAM))
        else:
            MIRROR_COMMITS.labels("ok").inc()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for task in self._imports.values():
            task.cancel()


class _Retriable(Exception):
    pass
