"""Which log partitions this instance serves, their writers, and loading them into a core.

One core per process holds the groups of every partition the instance serves (not one core per
partition as Kafka has): the shard runtime, its batching, release rule and timers stay as they
are, and a change of the served set rebuilds the core from the log (`ShardRuntime.reload_from_log`:
parked requests are answered NOT_COORDINATOR, timers re-armed fresh, as after a takeover). Only
the partitions that changed hands are claimed, so the fencing stays per partition.

The served set moves with the instance group (`membership.LogMembership`, whose listener this is):

- assigned: the partitions join `assigned`; the next load claims each (InitProducerId: the
  previous owner is fenced and its open transaction aborted), reads it `read_committed` through its
  high watermark and replays it; only then are its groups served (`serving`);
- revoked: its groups stop being served at once (NOT_COORDINATOR), the rounds already out are
  settled, then the partition is handed over (its writer dropped);
- lost (a missed session), or a write fenced: its groups stop being served at once and its writer is
  dropped, so nothing more is acknowledged for it.

Placement stays Kafka's: a group's partition is `partition_for(group id, partitions)`.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable, Mapping

from protocol.errors import ErrorCode

from ..core.offsets import LoadPlaces
from ..core.shard import CoordinatorShard
from ..logging import get_logger
from ..shards.placement import partition_for
from .cluster import LogCluster, LogUnavailable
from .membership import LogMembership
from .reader import PartitionReader
from .settings import ClusterLogConfig
from .tail import LogTail
from .topic import ensure_log_topic
from .writer import INIT_PRODUCER_ID, PartitionWriter, transactional_id

log = get_logger("coordinator.clusterlog.owner")

OWNED_CACHE = 1 << 16


class TransactionsUnsupported(Exception):
    """The upstream cluster cannot give a transactional producer id, or lacks an API the log needs;
    the message is one line."""


API_VERSIONS = 18
NEEDED: dict[int, tuple[str, int, str]] = {
    0: ("Produce", 9, "writes"), 1: ("Fetch", 12, "reads"), 3: ("Metadata", 12, "the topic"),
    10: ("FindCoordinator", 3, "coordinators"), 11: ("JoinGroup", 7, "the instance group"),
    12: ("Heartbeat", 4, "the instance group"), 13: ("LeaveGroup", 4, "the instance group"),
    14: ("SyncGroup", 5, "the instance group"), 19: ("CreateTopics", 7, "the topic"),
    22: ("InitProducerId", 4, "transactions"), 24: ("AddPartitionsToTxn", 3, "transactions"),
    26: ("EndTxn", 3, "transactions"), 32: ("DescribeConfigs", 4, "the topic's compaction check"),
}
"""api key -> (name, version this package sends, what it is for)."""


class UpstreamLog:
    def __init__(self, cluster: LogCluster, config: ClusterLogConfig, partitions: int, node_id: int) -> None:
        self.cluster = cluster
        self.config = config
        self.partitions = partitions
        self.node_id = node_id
        self.assigned: set[int] = set()
        """Partitions the instance group gave this instance."""
        self.serving: set[int] = set()
        """Partitions whose groups are answered here: assigned and loaded, not fenced."""
        self.owners: dict[int, int] = {}
        """partition → node id, as the group's leader last told it."""
        self.writers: dict[int, PartitionWriter] = {}
        self.on_change: Callable[[], None] | None = None
        """Called when the served set must change (the server rebuilds the core: `load`)."""
        self.settled: Callable[[], Awaitable[None]] | None = None
        """Waits until no write round is out (the sink's)."""
        self.loads = 0
        self._claiming = asyncio.Lock()
        """Held while a partition is claimed: a revoked partition is handed over only after, so a
        late InitProducerId of ours can never fence the instance that takes it next."""
        self.tail: LogTail | None = None
        """Every partition's compacted copy, kept read (`coordinator.log.tail.interval.ms` above 0)."""
        self.membership: LogMembership | None = None
        """The instance group (set once joined): the lease, and every partition's owner."""
        self.partition_of = functools.lru_cache(maxsize=OWNED_CACHE)(self._partition_of)

    def _partition_of(self, group_id: str) -> int:
        return partition_for(group_id, self.partitions)

    def owns_group(self, group_id: str) -> bool:
        """Whether this instance answers for the group now: its partition is served here and the
        lease holds (past it, the group may have given the partition to another instance)."""
        return self.partition_of(group_id) in self.serving and self.live()

    def refusal(self, group_id: str) -> int:
        """The code for a group `owns_group` refused: COORDINATOR_LOAD_IN_PROGRESS while its
        partition is given to us and still being claimed or replayed (Kafka's loading partition:
        the client retries here rather than asking FindCoordinator again), NOT_COORDINATOR
        otherwise (another instance's, or past our lease)."""
        if self.partition_of(group_id) in self.assigned and self.live():
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NOT_COORDINATOR

    def owner_endpoint(self, group_id: str, listener: str) -> tuple[int, str, int] | None:
        """(node id, host, port) of the instance owning the group's partition on `listener`, as
        the instance group's leader last told every member; None while it has no owner."""
        membership = self.membership
        if membership is None:
            return None
        node = membership.owners.get(self.partition_of(group_id))
        if node is None:
            return None
        for name, host, port in membership.nodes.get(node, ()):
            if name == listener:
                return node, host, port
        return None

    def instance_nodes(self, listener: str) -> list[tuple[int, str, int]]:
        """Every instance's node (id, host, port) on `listener`, as the instance group's leader last
        told every member. Each instance lists them all in Metadata, as a Kafka broker lists every
        live broker: a client then always knows instances beyond the one that may die next, so
        losing one never leaves it with every known broker down (librdkafka then re-bootstraps and
        drops the messages it had fetched but not yet handed over)."""
        membership = self.membership
        if membership is None:
            return []
        return [(node, host, port) for node, endpoints in sorted(membership.nodes.items())
                for name, host, port in endpoints if name == listener]

    def live(self) -> bool:
        membership = self.membership
        return membership is None or membership.live()

    def writer_of(self, partition: int) -> PartitionWriter | None:
        """The partition's writer while it is served here under the lease: a claim (InitProducerId)
        made past the lease could fence an instance the group has given the partition to."""
        return self.writers.get(partition) if partition in self.serving and self.live() else None

    # -- start-up checks ------------------------------------------------------------------------
    async def prepare(self) -> None:
        """The log topic with its shape (created or refused: `LogTopicError`), and transactions
        available (`TransactionsUnsupported`)."""
        await self._check_apis()
        await ensure_log_topic(self.cluster, self.config.log_topic, self.partitions)
        await self._check_transactions()

    async def _check_apis(self) -> None:
        response = await self.cluster.call_any(API_VERSIONS, 0, {})
        served = {int(a.api_key): (int(a.min_version), int(a.max_version)) for a in response.api_keys}
        missing = [f"{name} v{version} ({purpose})" for key, (name, version, purpose) in NEEDED.items()
                   if not served.get(key, (1, 0))[0] <= version <= served.get(key, (1, 0))[1]]
        if missing:
            raise TransactionsUnsupported(
                f"the upstream cluster does not serve {', '.join(missing)}: coordinator.log.storage=upstream "
                "needs a Kafka cluster with transactions (Apache Kafka 3.0 or later)")

    async def _check_transactions(self) -> None:
        # A transactional producer is an idempotent one: InitProducerId with a transactional.id
        # answering a producer id proves both. The id is this node's own, never used to write.
        probe = f"{self.config.log_group_id}-check-{self.node_id}"
        deadline = time.monotonic() + self.cluster.retry_for_s
        code = ErrorCode.NONE
        while True:
            try:
                response = await self.cluster.call_coordinator(probe, INIT_PRODUCER_ID, 4, {
                    "transactional_id": probe, "transaction_timeout": self.config.log_transaction_timeout_ms,
                    "producer_id": -1, "producer_epoch": -1})
            except LogUnavailable as exc:
                if time.monotonic() > deadline:
                    raise TransactionsUnsupported(
                        f"the upstream cluster gives no transaction coordinator ({exc}): coordinator.log.storage="
                        "upstream needs transactions and idempotence (transaction.state.log.* settings)") from exc
                await asyncio.sleep(0.2)
                continue
            code = ErrorCode(int(response.error_code))
            if code == ErrorCode.NONE and int(response.producer_id) >= 0:
                return
            if code in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.CONCURRENT_TRANSACTIONS,
                        ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE) \
                    and time.monotonic() < deadline:
                self.cluster.forget_coordinator(probe)
                await asyncio.sleep(0.1)
                continue
            break
        raise TransactionsUnsupported(
            f"the upstream cluster refused a transactional producer id ({code.name} for InitProducerId with "
            f"transactional.id {probe}): coordinator.log.storage=upstream needs transactions and idempotence")

    # -- loading --------------------------------------------------------------------------------
    async def load(self, core: CoordinatorShard) -> int:
        """Claim and replay every assigned partition into `core` (a fresh one); they are served from
        then on. Returns the records replayed."""
        if self.settled is not None:  # a round still out may commit entries the read must see
            await self.settled()
        started = time.monotonic()
        places = LoadPlaces()
        records = read_now = 0
        loaded: set[int] = set()
        for partition in sorted(self.assigned):
            writer = self.writers.get(partition)
            if writer is None:
                writer = self.writers[partition] = PartitionWriter(
                    self.cluster, self.config.log_topic, partition,
                    transactional_id(self.config.log_group_id, partition),
                    transaction_timeout_ms=self.config.log_transaction_timeout_ms,
                    retry_for_s=self.config.log_write_timeout_ms / 1000)
            async with self._claiming:  # a hand-over waits for a claim in flight (see `revoked`)
                if partition not in self.assigned:
                    continue
                if not writer.claimed:
                    if not self.live():  # see writer_of
                        raise LogUnavailable("the instance group has not answered for a session timeout")
                    await writer.claim()  # fences the previous owner and aborts what it left open
            if partition not in self.assigned:  # revoked or lost while we claimed
                continue
            if self.tail is not None:  # memory, then only what was written since the last read
                items, fetched = await self.tail.catch_up(partition)
            else:
                reader = PartitionReader(self.cluster, self.config.log_topic, partition)
                read, _ = await reader.read_to_high_watermark(0)
                items = [(r.key, r.value) for r in read if r.key is not None]
                fetched = len(read)
            core.replay_encoded(items, places)
            records += len(items)
            read_now += fetched
            loaded.add(partition)
        self.serving = loaded & self.assigned
        self.loads += 1
        log.info("cluster_log_loaded", partitions=len(self.serving), records=records, read=read_now,
                 seconds=round(time.monotonic() - started, 3))
        return records

    # -- the instance group's listener (membership.OwnershipListener) -------------------------------
    async def assigned_partitions(self, partitions: frozenset[int], owners: Mapping[int, int]) -> None:
        self.owners = dict(owners)
        new = partitions - self.assigned
        self.assigned |= partitions
        if new:
            log.info("log_partitions_assigned", partitions=sorted(new))
            self._changed()

    async def revoked(self, partitions: frozenset[int]) -> None:
        self.serving -= partitions
        self.assigned -= partitions
        async with self._claiming:
            pass  # a claim of one of them in flight has ended
        if self.settled is not None:
            await self.settled()  # what was written for them committed or was refused
        for partition in partitions:
            self.writers.pop(partition, None)
        log.info("log_partitions_revoked", partitions=sorted(partitions))
        self._changed()

    async def lost(self, partitions: frozenset[int]) -> None:
        self._drop(partitions, "lost")

    def fenced(self, partition: int, reason: str) -> None:
        """A write to `partition` was fenced: stop serving it now. If the instance group still gives
        it to us under the lease, nobody else may hold it (a transaction that timed out, or a late
        claim of an instance that lost it): claim it again and replay (Kafka Connect's leader
        reclaims its writer the same way); otherwise the group says who owns it next."""
        membership = self.membership
        if membership is not None and partition in membership.owned and membership.live():
            self.serving.discard(partition)
            self.writers.pop(partition, None)
            log.warning("log_partition_reclaimed", partition=partition, reason=reason)
            self._changed()
            return
        self._drop(frozenset((partition,)), "fenced", reason)

    def _drop(self, partitions: frozenset[int], why: str, reason: str = "") -> None:
        self.serving -= partitions
        self.assigned -= partitions
        for partition in partitions:
            self.writers.pop(partition, None)
        log.warning(f"log_partitions_{why}", partitions=sorted(partitions), reason=reason or None)
        self._changed()

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()


class MembershipListener:
    """`membership.OwnershipListener` over an `UpstreamLog` (its `assigned` is a set there)."""

    def __init__(self, owner: UpstreamLog) -> None:
        self.owner = owner

    async def revoked(self, partitions: frozenset[int]) -> None:
        await self.owner.revoked(partitions)

    async def assigned(self, partitions: frozenset[int], owners: Mapping[int, int]) -> None:
        await self.owner.assigned_partitions(partitions, owners)

    async def lost(self, partitions: frozenset[int]) -> None:
        await self.owner.lost(partitions)
