"""The upstream cluster as the sidecar knows it: brokers, API version ranges and topics, refreshed
from upstream Metadata, and whether the upstream can be reached now.

Theory of operation (one task, `run`):
- start: ApiVersions v0 then Metadata (all topics, no auto-creation) to a bootstrap server; until
  both have answered once, `ready` is unset (the server keeps group APIs in
  COORDINATOR_LOAD_IN_PROGRESS). A failure is retried with exponential backoff
  (`reconnect.backoff.ms` .. `reconnect.backoff.max.ms`, Kafka's client defaults 50 ms .. 1 s),
  never raised.
- steady: Metadata again every `upstream.metadata.max.age.ms`, or at once when `request_refresh()` is
  called (a subscription named a topic not known yet, a client's forwarded connection could not be
  opened); requests are coalesced and spaced by at least `retry.backoff.ms` (100 ms). In between,
  an ApiVersions v0 every `PROBE_INTERVAL_S` checks the upstream still answers: the metadata age
  alone (5 minutes by default) would notice an upstream gone far too late for /readyz.
- `reachable` is whether the last refresh or probe was answered: false from start until the first
  answer, false from the first failure until an answer again (then ApiVersions is read again too:
  the upstream may have come back as another version). /readyz and the forwarding routes follow it.
- every answer replaces the broker table and feeds the catalog, which tells its listeners of each
  topic created, grown, shrunk or deleted (consumer groups turn that into new target assignments).
- a forwarded Metadata answer that describes a topic otherwise than the catalog (`saw`: a topic
  created, grown or re-created since the last read) asks for a refresh at once, so the catalog
  knows every topic a client has seen through this process: while the upstream is away, the
  answers made here come from it (`unreachable`), and one without a topic the client knows would
  tell the client the topic is gone.
- while the upstream cannot be reached, one `upstream_unreachable` line per `lograte.INTERVAL_S`
  (with the failures held back), and one `upstream_reachable` when it answers again.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from prometheus_client import Gauge

from protocol.client import request_class

from ..catalog import Topic, TopicChange
from ..logging import get_logger
from ..security.upstream import UpstreamSecurity
from .lograte import RateLimitedLog
from .upstream import Address, UpstreamClient
from .wire import ForwardError, UpstreamProtocolError

log = get_logger("coordinator.sidecar.cluster")
limited = RateLimitedLog(log)

API_VERSIONS_KEY = 18
METADATA_KEY = 3
RECONNECT_BACKOFF_S = 0.05
RECONNECT_BACKOFF_MAX_S = 1.0
RETRY_BACKOFF_S = 0.1
PROBE_INTERVAL_S = 2.0
_ZERO_UUID = uuid.UUID(int=0)

REACHABLE = Gauge("coordinator_sidecar_upstream_reachable",
                  "Sidecar mode: 1 while the upstream cluster answers, 0 while not (and /readyz is false).")


class UpstreamCatalog:
    """The topic source of sidecar mode: the upstream's topics as last read (a `TopicSource`)."""

    def __init__(self) -> None:
        self._by_name: dict[str, Topic] = {}
        self._by_id: dict[uuid.UUID, Topic] = {}
        self._listeners: list[Callable[[TopicChange], None]] = []

    def get(self, name: str) -> Topic | None:
        return self._by_name.get(name)

    def by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return self._by_id.get(topic_id)

    def __iter__(self) -> Iterator[Topic]:
        return iter(sorted(self._by_name.values(), key=lambda t: t.name))

    def __len__(self) -> int:
        return len(self._by_name)

    def add_listener(self, listener: Callable[[TopicChange], None]) -> None:
        self._listeners.append(listener)

    def replace(self, topics: Sequence[Topic]) -> list[TopicChange]:
        """Make the catalog equal to `topics`; tell listeners of every difference."""
        now = {t.name: t for t in topics}
        changes = [TopicChange(self._by_name.get(name), topic) for name, topic in now.items()
                   if self._by_name.get(name) != topic]
        changes += [TopicChange(topic, None) for name, topic in self._by_name.items() if name not in now]
        self._by_name = now
        self._by_id = {t.topic_id: t for t in topics}
        for change in changes:
            for listener in self._listeners:
                listener(change)
        return changes


class UpstreamCluster:
    def __init__(self, bootstrap: Sequence[Address], max_age_ms: int,
                 on_brokers: Callable[[dict[int, Address]], None], security: UpstreamSecurity | None = None,
                 on_versions: Callable[[], None] | None = None) -> None:
        """`on_brokers` hears every broker table read; `on_versions` that the upstream's API
        version ranges were read and differ from before (the first time, or after an outage),
        once the refresh that read them is complete."""
        self.bootstrap = list(bootstrap)
        self.catalog = UpstreamCatalog()
        self.brokers: dict[int, Address] = {}
        self.api_ranges: dict[int, tuple[int, int]] = {}
        self.cluster_id: str | None = None
        self.ready = asyncio.Event()
        """Set once the upstream has answered ApiVersions and Metadata (it stays set)."""
        self.reachable = False
        """The upstream answered the last refresh or probe."""
        REACHABLE.set_function(lambda: float(self.reachable))
        self.client = UpstreamClient(self.bootstrap, self.brokers.get, security=security,
                                     brokers=lambda: list(self.brokers))
        self._max_age_s = max_age_ms / 1000
        self._on_brokers = on_brokers
        self._on_versions = on_versions
        self._wake = asyncio.Event()
        self._refreshed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._seen: set[tuple[str, uuid.UUID, int]] = set()
        self.last_refresh_monotonic = 0.0

    @property
    def names(self) -> str:
        return ",".join(f"{h}:{p}" for h, p in self.bootstrap)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="upstream-metadata")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.client.close()

    def request_refresh(self) -> None:
        self._wake.set()

    async def refreshed(self) -> None:
        """Wait for the next completed refresh (tests, and callers that asked for one)."""
        self._refreshed.clear()
        self.request_refresh()
        await self._refreshed.wait()

    def version_for(self, api_key: int, highest: int, lowest: int = 0) -> int | None:
        """The highest version of `api_key` both the upstream and we (`highest`) speak."""
        upstream = self.api_ranges.get(api_key)
        if upstream is None:
            return None
        version = min(upstream[1], highest)
        return version if version >= max(upstream[0], lowest) else None

    def saw(self, topics: Iterable[tuple[str, uuid.UUID | None, int]]) -> None:
        """A forwarded Metadata answer described `topics` (name, id or None, partition count):
        refresh now if one is not in the catalog so. Each description asks once: under an
        authorizer a client may see a topic the coordinator may not, which no refresh adds."""
        for name, topic_id, partitions in topics:
            description = (name, topic_id or _ZERO_UUID, partitions)
            if not self._in_catalog(description) and description not in self._seen:
                self._seen.add(description)
                self.request_refresh()

    def _in_catalog(self, description: tuple[str, uuid.UUID, int]) -> bool:
        name, topic_id, partitions = description
        known = self.catalog.get(name)
        return known is not None and known.num_partitions == partitions and topic_id in (_ZERO_UUID, known.topic_id)

    def suspect(self) -> None:
        """Something failed to reach the upstream (a client's forwarded connection): check now."""
        self.request_refresh()

    async def _run(self) -> None:
        backoff = RECONNECT_BACKOFF_S
        failing_since: float | None = None
        failures = 0
        refresh = True
        while True:
            try:
                await (self._refresh() if refresh else self._probe())
            except (TimeoutError, ForwardError, UpstreamProtocolError) as exc:
                self.reachable = False
                failures += 1
                if failing_since is None:
                    failing_since = time.monotonic()
                limited.warning("upstream_unreachable", upstream=self.names, error=str(exc) or type(exc).__name__,
                                retry_in_ms=int(backoff * 1000),
                                failing_for_s=round(time.monotonic() - failing_since, 1))
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, RECONNECT_BACKOFF_MAX_S)
                refresh = True
                continue
            if failing_since is not None:
                limited.reset("upstream_unreachable")  # the next outage is logged as it starts
                log.info("upstream_reachable", upstream=self.names, failures=failures,
                         unreachable_for_s=round(time.monotonic() - failing_since, 1))
                failing_since = None
                failures = 0
            backoff = RECONNECT_BACKOFF_S
            refresh = await self._next()

    async def _next(self) -> bool:
        """Wait for what comes next: True a refresh (asked for, or the metadata is old), False a probe."""
        due = self.last_refresh_monotonic + self._max_age_s
        try:
            await asyncio.wait_for(self._wake.wait(), max(0.0, min(PROBE_INTERVAL_S, due - time.monotonic())))
        except TimeoutError:
            return time.monotonic() >= due
        await asyncio.sleep(RETRY_BACKOFF_S)  # coalesce a burst of refresh requests
        return True

    async def _probe(self) -> None:
        response, address = await self.client.call_any(API_VERSIONS_KEY, request_class(API_VERSIONS_KEY, 0)())
        if response.error_code:
            raise ForwardError(f"upstream {address} answered ApiVersions with error {int(response.error_code)}")

    async def _refresh(self) -> None:
        self._wake.clear()
        if not self.api_ranges or not self.reachable:
            cls = request_class(API_VERSIONS_KEY, 0)
            response, address = await self.client.call_any(API_VERSIONS_KEY, cls())
            if response.error_code:
                raise ForwardError(f"upstream {address} answered ApiVersions with error {int(response.error_code)}")
            ranges = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys}
            versions_changed = ranges != self.api_ranges
            if versions_changed:
                self.api_ranges = ranges
        else:
            versions_changed = False
        version = self.version_for(METADATA_KEY, 12, 1)
        if version is None:
            raise ForwardError(f"upstream {self.names} serves no Metadata version we speak")
        from protocol.build import build

        request = build(request_class(METADATA_KEY, version), {"topics": None, "allow_auto_topic_creation": False})
        response, _ = await self.client.call_any(METADATA_KEY, request)
        self._apply(response)
        if versions_changed and self._on_versions is not None:
            self._on_versions()

    def _apply(self, response: Any) -> None:
        brokers = {int(b.node_id): (str(b.host), int(b.port)) for b in response.brokers}
        if brokers != self.brokers:
            log.info("upstream_brokers", brokers={k: f"{h}:{p}" for k, (h, p) in sorted(brokers.items())})
        self.brokers.clear()
        self.brokers.update(brokers)
        self.cluster_id = getattr(response, "cluster_id", None)
        topics = []
        for t in response.topics:
            if t.error_code or t.name is None:
                continue
            topic_id = getattr(t, "topic_id", None) or _ZERO_UUID
            if topic_id == _ZERO_UUID:
                # An upstream without topic ids (Kafka < 2.8): a stable id derived from the name, so
                # KIP-848 assignments have one (clients still need the upstream to resolve it).
                topic_id = uuid.uuid5(uuid.NAMESPACE_URL, f"kafka-topic:{t.name}")
            topics.append(Topic(str(t.name), topic_id, len(t.partitions)))
        self._on_brokers(dict(self.brokers))
        changes = self.catalog.replace(topics)
        self._seen = {d for d in self._seen if not self._in_catalog(d)}  # only what a refresh did not add
        for change in changes:
            before, after = change.before, change.after
            log.info("upstream_topic_changed", topic=(after.name if after else before.name if before else None),
                     partitions_before=before.num_partitions if before else None,
                     partitions_after=after.num_partitions if after else None)
        self.last_refresh_monotonic = time.monotonic()
        self.reachable = True
        self.ready.set()
        self._refreshed.set()
