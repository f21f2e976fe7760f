"""The simulated world around one coordinator shard: log, disk, clock, timers, topics and the network.

``World`` owns everything that is not a client: the live shard, a shadow shard that replays the log
record by record (the "standby"), the log with one entry per ``Result`` (so a crash can cut the last,
unacknowledged one), the armed timers, the topic catalog, the clock and the in-flight requests.

The network: a client's request goes in with a *fate* chosen by the scenario:

``ok``
    the reply is delivered to the client, whenever the core releases it (a parked JoinGroup or SyncGroup
    is answered in the ``Result`` of a later event);
``lost``
    the request reached the coordinator but the reply is lost: when it comes, the client is told the
    request failed (as a client times out and retries);
``ignored``
    the client does not wait for it any more: it gave up on it (request timeout).
``duplicate``
    applied, but the answer never comes: the client gives up and retries at once.

A coordinator restart (with or without losing the last write) breaks every connection: all in-flight
requests fail; the new shard loads the log through the record log, as the server does (``loaded``). ``handle_batch`` is the only place that knows how the core takes a runtime batch.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from uuid import UUID

from coordinator.core.config import GroupConfig
from coordinator.core.records import Record, decode_record, encode_record
from coordinator.core.requests import Event, Request, TimerFired, TopicsChanged
from coordinator.core.result import Result
from coordinator.core.shard import CoordinatorShard
from coordinator.core.topics import TopicInfo
from tests.core.consumer.harness import check_consumer_invariants
from tests.core.harness import check_invariants
from tests.support.loading import loaded as load_entries

if TYPE_CHECKING:
    from tests.sim.model import ModelClient

CONFIG = GroupConfig(
    group_initial_rebalance_delay_ms=500,
    group_min_session_timeout_ms=1_000,
    consumer_group_session_timeout_ms=10_000,
    consumer_group_heartbeat_interval_ms=1_000,
    consumer_group_min_session_timeout_ms=1_000,
    consumer_group_min_heartbeat_interval_ms=100,
)
HEARTBEAT_MS = 1_000


class SimulationFailure(AssertionError):
    pass


def handle_batch(shard: CoordinatorShard, events: list[Request], now_ms: int) -> list[Result]:
    """One runtime batch (the only code that knows how the core takes batches): one Result, that is
    one log entry, per event; the shard's state already includes all of them when it returns."""
    results = shard.handle_batch(events, now_ms)
    for result in results:
        if result.failure is not None:
            raise SimulationFailure(f"the core failed on an event of the batch: {result.failure!r}")
    return results


@dataclass
class InFlight:
    client: ModelClient
    request: Request
    fate: str  # "ok" | "lost" | "ignored"


class World:
    def __init__(self, seed: int, config: GroupConfig = CONFIG) -> None:
        self.seed = seed
        self.config = config
        self.rng = random.Random(seed)
        self.now = 1_000_000
        self.log: list[Record] = []
        self.entries: list[tuple[int, int]] = []  # (start, end) of each result's records in the log
        self.timers: dict[tuple[str, ...], int] = {}
        self.topics: dict[str, TopicInfo] = {}
        self.topic_names: dict[UUID, str] = {}  # every topic id ever created (ids are never reused)
        self.inflight: dict[int, InFlight] = {}
        self.restarts = 0
        self.ticks = 0  # events handled so far: orders what clients heard against what groups did
        # group id -> (classic generation, tick the checker first saw it): when a group moved on
        self.generation_since: dict[str, tuple[int, int]] = {}
        self.trace: list[str] = []
        # Groups seen without members since the checker last looked (after every event): an empty
        # group may be replaced by one of the other type, which starts its epochs over.
        self.emptied: set[str] = set()
        self._ref = 0
        self._ids = 0
        self.shard = CoordinatorShard(config)
        self.shadow = CoordinatorShard(config)
        self.absorb(self.shard.on_loaded(self.now))

    # ---- identities ------------------------------------------------------------------------------

    def next_ref(self) -> int:
        self._ref += 1
        return self._ref

    def new_id(self, prefix: str) -> str:
        """A fresh member id (the adapter's uuid4, deterministic here)."""
        self._ids += 1
        return f"{prefix}-{self._ids:04d}"

    def note(self, text: str) -> None:
        self.trace.append(f"t={self.now} {text}")

    # ---- topics ----------------------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int, post: bool = True) -> TopicInfo:
        info = TopicInfo(UUID(int=len(self.topic_names) + 1), name, partitions)
        self.topics[name] = info
        self.topic_names[info.topic_id] = name
        if post:
            self.post(TopicsChanged((info,)))
        return info

    def grow_topic(self, name: str) -> TopicInfo:
        info = self.topics[name] = self.topics[name]._replace(num_partitions=self.topics[name].num_partitions + 1)
        self.post(TopicsChanged((info,)))
        return info

    def delete_topic(self, name: str) -> None:
        info = self.topics.pop(name)
        self.post(TopicsChanged(deleted=(info.topic_id,)))

    def post_catalog(self) -> None:
        self.post(TopicsChanged(tuple(self.topics.values()), snapshot=True))

    # ---- the shard and the log ---------------------------------------------------------------------

    def post(self, event: Event | TimerFired, route: bool = True) -> Result:
        result = self.shard.handle(event, self.now)
        self.ticks += 1
        self.absorb(result)
        self.emptied.update(gid for gid, group in self.shard.groups.items() if group.is_empty)
        if route:
            self.route(result)
        return result

    def absorb(self, result: Result) -> None:
        start = len(self.log)
        for record in result.records:
            decoded = decode_record(*encode_record(record))
            self.log.append(decoded)
            self.shadow.replay(decoded)
        self.entries.append((start, len(self.log)))
        for op in result.timers:
            if op.deadline_ms is None:
                self.timers.pop(op.key, None)
            else:
                self.timers[op.key] = op.deadline_ms

    def route(self, result: Result) -> None:
        """Deliver the replies the core released to the clients that wait for them."""
        for reply in result.replies:
            flight = self.inflight.pop(reply.ref, None)
            if flight is None or flight.fate == "ignored":
                continue
            self.note(f"  #{reply.ref} -> {flight.client.name}: {_answer(reply.response)} ({flight.fate})")
            if flight.fate == "lost" or not flight.client.alive:
                flight.client.on_lost(self, flight.request)
            else:
                flight.client.on_reply(self, flight.request, reply.response)

    def send(self, client: ModelClient, request: Request, fate: str) -> None:
        """One request over the network; ``fate`` as in the module docstring, or ``crash`` (the
        coordinator dies before the request's write is durable) or ``duplicate`` (sent twice)."""
        self.note(f"{client.name} sends {_describe(request)} ({fate})")
        if fate == "duplicate":
            # Applied, but the client never hears back: it times out and sends again what it would
            # send now (a full heartbeat, the same JoinGroup, ...), and acts on that answer.
            self.inflight[request.ref] = InFlight(client, request, "lost")
            client.sent(self, request)
            self.post(request)
            client.give_up(self)
            retry = client.next_request(self)
            if retry is None:
                return
            self.note(f"{client.name} retries {_describe(retry)}")
            request, fate = retry, "ok"
        self.inflight[request.ref] = InFlight(client, request, "lost" if fate == "lost" else "ok")
        client.sent(self, request)
        if fate == "crash":
            self.post(request, route=False)
            self.note("coordinator crashes before the write is durable")
            self.restart(drop_last=True)
        else:
            self.post(request)

    def send_batch(self, sent: list[tuple[ModelClient, Request]], fate: str, check: Any, retry: bool = False) -> None:
        """Requests the runtime handles as one batch; replies are released after the batch. ``retry``:
        the first client gives up on its request at once and its retry joins the same batch."""
        for client, request in sent:
            self.inflight[request.ref] = InFlight(client, request, "lost" if fate == "lost" else "ok")
            client.sent(self, request)
        if retry and sent:
            client = sent[0][0]
            client.give_up(self)
            again = client.next_request(self)
            if again is not None:
                self.inflight[again.ref] = InFlight(client, again, "lost" if fate == "lost" else "ok")
                client.sent(self, again)
                sent = [*sent, (client, again)]
        self.note(f"batch of {[c.name for c, _ in sent]} ({fate})")
        refs = {request.ref for _, request in sent}

        results = handle_batch(self.shard, [r for _, r in sent], self.now)
        for result in results:
            self.ticks += 1
            self.absorb(result)
            # The live shard is at the batch's end; the shadow replays entry by entry (a crash may
            # cut the log after any of them), so its own invariants are checked at each.
            check_consumer_invariants(self.shadow)
            check_invariants(self.shadow)
        check()
        replied = {reply.ref for result in results for reply in result.replies}
        if not refs <= replied:
            raise SimulationFailure(f"batch replies {sorted(replied)} for {sorted(refs)}")
        if fate == "crash":
            self.note("coordinator crashes before the batch's last write is durable")
            self.restart(drop_last=True)
            return
        for result in results:
            self.route(result)

    def restart(self, drop_last: bool = False) -> None:
        """A new shard replays the log (without its last entry if that write never reached the disk);
        soft state and timers are gone and every connection breaks."""
        dropped = False
        if drop_last and self.entries:
            start, _ = self.entries.pop()
            dropped = start < len(self.log)
            del self.log[start:]
        self.restarts += 1
        self.shard = loaded(self.log, self.entries, self.config)
        if dropped:  # else the shadow already is the replay of exactly this log
            self.shadow = replayed(self.log, self.config)
        self.timers = {}
        self.entries.append((len(self.log), len(self.log)))
        broken, self.inflight = self.inflight, {}
        self.absorb(self.shard.on_loaded(self.now))
        self.post_catalog()
        for flight in broken.values():
            if flight.fate != "ignored":
                flight.client.on_lost(self, flight.request)

    def advance(self, ms: int, check: Any) -> None:
        """Let ``ms`` pass, firing due timers in deadline order (``check`` after each)."""
        target = self.now + ms
        while True:
            due = [(deadline, key) for key, deadline in self.timers.items() if deadline <= target]
            if not due:
                break
            deadline, key = min(due)
            self.now = deadline
            del self.timers[key]
            self.note(f"timer {key}")
            self.post(TimerFired(key, deadline))
            check()
        self.now = target


def replayed(records: list[Record], config: GroupConfig = CONFIG) -> CoordinatorShard:
    shard = CoordinatorShard(config)
    for record in records:
        shard.replay(record)
    return shard


def loaded(log: list[Record], entries: list[tuple[int, int]], config: GroupConfig = CONFIG) -> CoordinatorShard:
    """A new shard that loaded the log the way a restarted server does (``tests.support.loading``)."""
    return load_entries((log[start:end] for start, end in entries), config)


def compacted(log: list[Record]) -> list[Record]:
    """What log compaction keeps: the last record per key, in log order, without tombstones."""
    last: dict[tuple[int, bytes], int] = {}
    for index, record in enumerate(log):
        rtype, key, _ = encode_record(record)
        last[(rtype, key)] = index
    keep = sorted(last.values())
    return [log[i] for i in keep if log[i].value is not None]


def _describe(request: Request) -> str:
    fields = {k: getattr(request, k) for k in ("member_epoch", "generation_id", "member_id") if hasattr(request, k)}
    return f"{type(request).__name__}#{request.ref} {fields}"


def _answer(response: object) -> str:
    code = getattr(response, "error_code", None)
    extra = {k: getattr(response, k) for k in ("generation_id", "member_epoch", "leader") if hasattr(response, k)}
    return f"{type(response).__name__}({code!r}{', ' if extra else ''}{extra if extra else ''})"
