"""A seeded simulation of KIP-848 consumer groups against the pure core.

Model clients behave like librdkafka's ``group.protocol=consumer``: a full request on (re)join and after
any failure, ``TopicPartitions`` only to acknowledge a new assignment, instant reconciliation (a client
drops revoked partitions and takes new ones as soon as a response tells it), and on
UNKNOWN_MEMBER_ID / FENCED_MEMBER_EPOCH it drops everything and rejoins with epoch 0 and the same
member id.

Faults, chosen by the seed: lost responses (the request was applied, the client retries as a full
request), duplicated requests, coordinator crashes that lose the last unacknowledged write (the log is
cut before it; the client never got the answer), coordinator restarts, clients that crash (no leave:
the session timeout must fence them), pause and resume, leave, subscription changes (names and RE2
regexes), topic creation, partition growth and topic deletion, time passing (session and rebalance
timers).

Checked after EVERY step:

* the live shard's durable view equals a shadow shard that replayed the log incrementally (and, at
  restarts and at the end, a full replay; at the end also the replay of the compacted log);
* the core's ownership invariants (``check_consumer_invariants``): no partition in two members'
  assigned ∪ pending-revocation sets;
* no partition is owned by two clients that are still members (the client-side safety property);
* epochs never go back: group epoch, assignment epoch, and each member's epoch while it stays a
  member (server side), and the epochs each client sees between two rejoins (client side).

Then a liveness phase without faults: every live client heartbeats each interval until every group is
Stable, every client owns exactly its target and every subscribed partition is owned once.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from msgspec.structs import replace

from coordinator.core.config import GroupConfig
from coordinator.core.consumer.group import ConsumerGroup
from coordinator.core.consumer.topics import TopicInfo
from coordinator.core.errors import ErrorCode
from coordinator.core.records import Record, decode_record, encode_record
from coordinator.core.requests import (
    ConsumerGroupHeartbeat,
    HeartbeatTopicPartitions,
    TimerFired,
    TopicsChanged,
)
from coordinator.core.result import Result
from coordinator.core.shard import CoordinatorShard
from tests.core.consumer.harness import check_consumer_invariants

CONFIG = GroupConfig(
    consumer_group_session_timeout_ms=10_000,
    consumer_group_heartbeat_interval_ms=1_000,
    consumer_group_min_session_timeout_ms=1_000,
    consumer_group_min_heartbeat_interval_ms=100,
)
REBALANCE_TIMEOUT_MS = 6_000
HEARTBEAT_MS = 1_000

SUBSCRIPTIONS: list[tuple[tuple[str, ...], str]] = [
    (("t0",), ""),
    (("t0", "t1"), ""),
    (("t1",), ""),
    (("t2",), ""),  # created later by the simulation
    ((), "t.*"),
    (("t3",), "t[01]"),
]
OK = ErrorCode.NONE
REJOIN_ERRORS = {ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH}

Owned = dict[UUID, frozenset[int]]


class SimulationFailure(AssertionError):
    pass


@dataclass
class Client:
    member_id: str
    group_id: str
    names: tuple[str, ...]
    regex: str
    alive: bool = True  # False: crashed for good
    paused: bool = False
    epoch: int = 0  # 0 = must (re)join
    owned: Owned = field(default_factory=dict)
    full: bool = True  # next request is a full one
    ack: bool = False  # next request carries TopicPartitions (acknowledging a new assignment)
    subscription_dirty: bool = False
    last_seen_epoch: int = -1
    leaving: bool = False

    def request(self, ref: int) -> ConsumerGroupHeartbeat:
        owned = tuple(HeartbeatTopicPartitions(t, tuple(sorted(ps))) for t, ps in sorted(self.owned.items()) if ps)
        if self.leaving:
            return ConsumerGroupHeartbeat(ref, self.group_id, self.member_id, -1)
        if self.epoch == 0 or self.full:
            return ConsumerGroupHeartbeat(
                ref, self.group_id, self.member_id, self.epoch,
                rebalance_timeout_ms=REBALANCE_TIMEOUT_MS,
                subscribed_topic_names=self.names, subscribed_topic_regex=self.regex,
                topic_partitions=() if self.epoch == 0 else owned,
                client_id=self.member_id, client_host="/10.0.0.1",
            )
        return ConsumerGroupHeartbeat(
            ref, self.group_id, self.member_id, self.epoch,
            subscribed_topic_names=self.names if self.subscription_dirty else None,
            subscribed_topic_regex=self.regex if self.subscription_dirty else None,
            topic_partitions=owned if self.ack else None,
            client_id=self.member_id, client_host="/10.0.0.1",
        )

    def on_response(self, sent: ConsumerGroupHeartbeat, response: Any) -> None:
        if sent.member_epoch < 0:
            self.leaving = False
            self.alive = False  # a client that left is done
            self.owned = {}
            return
        if response.error_code in REJOIN_ERRORS:
            self.owned = {}
            self.epoch = 0
            self.full = True
            self.ack = False
            self.last_seen_epoch = -1
            return
        if response.error_code != OK:
            raise SimulationFailure(f"{self.member_id}: unexpected {response.error_code!r} {response.error_message}")
        if response.member_epoch < self.last_seen_epoch:
            raise SimulationFailure(
                f"{self.member_id} saw its epoch go back: {self.last_seen_epoch} -> {response.member_epoch}"
            )
        self.last_seen_epoch = response.member_epoch
        self.epoch = response.member_epoch
        self.full = False
        if sent.topic_partitions is not None:
            self.ack = False
        if sent.subscribed_topic_names is not None:
            self.subscription_dirty = False
        if response.assignment is not None:
            new = {t: frozenset(ps) for t, ps in response.assignment if ps}
            if new != self.owned:
                self.owned = new  # revoke and assign at once, then acknowledge
                self.ack = True

    def on_lost(self) -> None:
        self.full = True  # clients resend everything after a failed request


class Simulation:
    def __init__(self, seed: int, steps: int, groups: int = 2, max_clients: int = 8, batched: bool = False) -> None:
        self.seed = seed
        # batched: requests go to the shard as the runtime sends them, several per batch
        # (``handle_batch``), so heartbeats may wait for their group's one target assignment.
        self.batched = batched
        self.rng = random.Random(seed)
        self.steps = steps
        self.group_ids = [f"g{i}" for i in range(groups)]
        self.max_clients = max_clients
        self.now = 1_000_000
        self.log: list[Record] = []
        self.entries: list[tuple[int, int]] = []  # (start, end) of each result's records in the log
        self.timers: dict[tuple[str, ...], int] = {}
        self.topics: dict[str, TopicInfo] = {}
        self.next_topic_id = 0
        self.clients: list[Client] = []
        self.next_member = 0
        self.ref = 0
        self.trace: list[str] = []
        # monotonicity baselines (server side)
        self.group_epochs: dict[str, tuple[int, int]] = {}
        self.member_epochs: dict[tuple[str, str], int] = {}
        self.shard = CoordinatorShard(CONFIG)
        self.shadow = CoordinatorShard(CONFIG)
        self._absorb(self.shard.on_loaded(self.now))
        for name, partitions in (("t0", 4), ("t1", 3), ("t3", 2)):
            self._topic(name, partitions)
        self._post(TopicsChanged(tuple(self.topics.values()), snapshot=True))

    # ---- plumbing --------------------------------------------------------------------------------------

    def _topic(self, name: str, partitions: int) -> TopicInfo:
        self.next_topic_id += 1
        info = TopicInfo(UUID(int=self.next_topic_id), name, partitions)
        self.topics[name] = info
        return info

    def _post(self, event: Any) -> Result:
        result = self.shard.handle(event, self.now)
        self._absorb(result)
        return result

    def _absorb(self, result: Result) -> None:
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

    def _restart(self, drop_last: bool = False) -> None:
        if drop_last and self.entries:
            start, _ = self.entries.pop()
            del self.log[start:]  # the last write never reached the disk
        self.shard = self._replayed(self.log)
        self.shadow = self._replayed(self.log)
        self.timers = {}
        self.entries.append((len(self.log), len(self.log)))
        self._absorb(self.shard.on_loaded(self.now))
        self._post(TopicsChanged(tuple(self.topics.values()), snapshot=True))
        self._rebaseline()

    @staticmethod
    def _replayed(records: list[Record]) -> CoordinatorShard:
        shard = CoordinatorShard(CONFIG)
        for record in records:
            shard.replay(record)
        return shard

    def _rebaseline(self) -> None:
        """After a crash lost an unacknowledged write, epochs may legitimately be lower than that
        write had made them: nobody saw them."""
        self.group_epochs.clear()
        self.member_epochs.clear()
        self._check_epochs()

    def _note(self, text: str) -> None:
        self.trace.append(f"t={self.now} {text}")

    # ---- client operations ------------------------------------------------------------------------------

    def _send(self, client: Client, fate: str) -> None:
        self.ref += 1
        request = client.request(self.ref)
        self._note(f"{client.member_id} sends epoch={request.member_epoch} full={client.full} ack={client.ack} ({fate})")
        result = self._post(request)
        if fate == "duplicate":
            self.ref += 1
            again = self._post(_with_ref(request, self.ref))
            result = again
        (reply,) = result.replies
        if fate == "lost":
            client.on_lost()
            return
        if fate == "crash":
            self._note("coordinator crashes before the write is durable")
            self._restart(drop_last=True)
            client.on_lost()
            return
        client.on_response(request, reply.response)

    def _send_batch(self, clients: list[Client], fate: str, duplicate: bool = False) -> None:
        """One runtime batch (``handle_batch``); replies are released after."""
        sent: list[tuple[Client, ConsumerGroupHeartbeat]] = []
        for client in clients:
            self.ref += 1
            sent.append((client, client.request(self.ref)))
        if duplicate and sent:
            self.ref += 1
            sent.append((sent[0][0], _with_ref(sent[0][1], self.ref)))  # the same member twice in a batch
        self._note(f"batch of {[c.member_id for c, _ in sent]} ({fate})")
        replies: dict[int, Any] = {}
        for result in self.shard.handle_batch([request for _, request in sent], self.now):
            self._absorb(result)  # the shadow replays entry by entry: a crash may cut the log anywhere
            check_consumer_invariants(self.shadow)
            replies.update((r.ref, r.response) for r in result.replies)
        self.check()
        if {request.ref for _, request in sent} != set(replies):
            raise SimulationFailure(f"batch replies {sorted(replies)} for {[r.ref for _, r in sent]}")
        if fate == "crash":
            self._note("coordinator crashes before the batch's last write is durable")
            self._restart(drop_last=True)
        answered: set[str] = set()
        for client, request in reversed(sent):  # a duplicate: the client sees the last answer only
            if client.member_id in answered:
                continue
            answered.add(client.member_id)
            if fate == "ok":
                client.on_response(request, replies[request.ref])
            else:
                client.on_lost()

    def _new_client(self) -> None:
        self.next_member += 1
        names, regex = self.rng.choice(SUBSCRIPTIONS)
        client = Client(f"m{self.next_member}", self.rng.choice(self.group_ids), names, regex)
        self.clients.append(client)
        self._note(f"{client.member_id} starts in {client.group_id} with {names} {regex!r}")

    def _live(self) -> list[Client]:
        return [c for c in self.clients if c.alive and not c.paused]

    def _advance(self, ms: int) -> None:
        target = self.now + ms
        while True:
            due = sorted((deadline, key) for key, deadline in self.timers.items() if deadline <= target)
            if not due:
                break
            deadline, key = due[0]
            self.now = deadline
            del self.timers[key]
            self._note(f"timer {key}")
            self._post(TimerFired(key, deadline))
            self.check()
        self.now = target

    def step(self) -> None:
        live = self._live()
        roll = self.rng.random()
        if roll < 0.08 or not live:
            if len([c for c in self.clients if c.alive]) < self.max_clients:
                self._new_client()
            return
        if roll < 0.62 and self.batched:
            clients = self.rng.sample(live, self.rng.randint(1, min(len(live), 5)))
            fate = self.rng.choices(["ok", "lost", "crash"], [86, 10, 4])[0]
            self._send_batch(clients, fate, duplicate=self.rng.random() < 0.06)
        elif roll < 0.62:
            client = self.rng.choice(live)
            fate = self.rng.choices(["ok", "lost", "duplicate", "crash"], [80, 10, 6, 4])[0]
            self._send(client, fate)
        elif roll < 0.75:
            self._advance(self.rng.choice([200, 500, 1_000, 3_000, 7_000]))
        elif roll < 0.79:
            client = self.rng.choice(live)
            client.leaving = True
            self._note(f"{client.member_id} leaves")
            self._send(client, "ok")
        elif roll < 0.82:
            client = self.rng.choice(live)
            client.alive = False
            self._note(f"{client.member_id} crashes")
        elif roll < 0.85:
            client = self.rng.choice(live)
            client.paused = True
            self._note(f"{client.member_id} pauses")
        elif roll < 0.88:
            paused = [c for c in self.clients if c.alive and c.paused]
            if paused:
                client = self.rng.choice(paused)
                client.paused = False
                client.full = True
                self._note(f"{client.member_id} resumes")
        elif roll < 0.92:
            client = self.rng.choice(live)
            client.names, client.regex = self.rng.choice(SUBSCRIPTIONS)
            client.subscription_dirty = True
            self._note(f"{client.member_id} subscribes to {client.names} {client.regex!r}")
        elif roll < 0.95:
            self._topic_change()
        elif roll < 0.97:
            self._note("coordinator restarts")
            self._restart()
        else:
            self._advance(self.rng.choice([10_000, 12_000]))

    def _topic_change(self) -> None:
        kind = self.rng.choice(["create", "grow", "grow", "delete"])
        if kind == "create" and "t2" not in self.topics:
            info = self._topic("t2", self.rng.randint(1, 4))
            self._note(f"topic t2 created with {info.num_partitions}")
            self._post(TopicsChanged((info,)))
        elif kind == "grow" and self.topics:
            name = self.rng.choice(sorted(self.topics))
            info = self.topics[name] = self.topics[name]._replace(num_partitions=self.topics[name].num_partitions + 1)
            self._note(f"topic {name} grows to {info.num_partitions}")
            self._post(TopicsChanged((info,)))
        elif kind == "delete" and "t2" in self.topics:
            info = self.topics.pop("t2")
            self._note("topic t2 deleted")
            self._post(TopicsChanged(deleted=(info.topic_id,)))

    # ---- checks ----------------------------------------------------------------------------------------

    def check(self) -> None:
        if self.shard.durable_view() != self.shadow.durable_view():
            raise SimulationFailure("live state differs from the replay of the log")
        check_consumer_invariants(self.shard)
        self._check_clients()
        self._check_epochs()

    def _check_clients(self) -> None:
        seen: dict[tuple[str, UUID, int], str] = {}
        for client in self.clients:
            if not client.alive:
                continue
            group = self.shard.group(client.group_id)
            if not isinstance(group, ConsumerGroup) or client.member_id not in group.members:
                continue  # a zombie (fenced while paused): it learns on its next heartbeat
            for topic_id, partitions in client.owned.items():
                for p in partitions:
                    other = seen.setdefault((client.group_id, topic_id, p), client.member_id)
                    if other != client.member_id:
                        raise SimulationFailure(f"{topic_id}-{p} owned by clients {other} and {client.member_id}")

    def _check_epochs(self) -> None:
        present: set[tuple[str, str]] = set()
        for group_id, group in self.shard.groups.items():
            if not isinstance(group, ConsumerGroup):
                continue
            before = self.group_epochs.get(group_id)
            now = (group.group_epoch, group.assignment_epoch)
            if before is not None and (now[0] < before[0] or now[1] < before[1]):
                raise SimulationFailure(f"{group_id}: epochs went back from {before} to {now}")
            self.group_epochs[group_id] = now
            for member_id, member in group.members.items():
                key = (group_id, member_id)
                present.add(key)
                last = self.member_epochs.get(key)
                if last is not None and 0 <= member.member_epoch < last:
                    raise SimulationFailure(f"{key}: member epoch went back from {last} to {member.member_epoch}")
                self.member_epochs[key] = max(member.member_epoch, last if last is not None else -1)
        for key in set(self.member_epochs) - present:
            del self.member_epochs[key]  # removed: a rejoin starts over
        for group_id in set(self.group_epochs) - set(self.shard.groups):
            del self.group_epochs[group_id]

    def check_full_replay(self) -> None:
        if self._replayed(self.log).durable_view() != self.shard.durable_view():
            raise SimulationFailure("a full replay of the log differs from the live state")
        if self._replayed(compacted(self.log)).durable_view() != self.shard.durable_view():
            raise SimulationFailure("the replay of the compacted log differs from the live state")

    # ---- liveness ---------------------------------------------------------------------------------------

    def converged(self) -> bool:
        clients = [c for c in self.clients if c.alive]
        for group_id in self.group_ids:
            group = self.shard.group(group_id)
            mine = [c for c in clients if c.group_id == group_id]
            if group is None:
                if mine:
                    return False
                continue
            if not isinstance(group, ConsumerGroup):
                return False
            if set(group.members) != {c.member_id for c in mine}:
                return False
            if mine and group.state_name != "Stable":
                return False
            wanted: set[tuple[UUID, int]] = set()
            for member in group.members.values():
                for topic_id in self.shard.consumer.member_topic_ids(member):
                    info = self.shard.topics.by_id(topic_id)
                    assert info is not None
                    wanted |= {(topic_id, p) for p in range(info.num_partitions)}
            owned: list[tuple[UUID, int]] = []
            for c in mine:
                member = group.members[c.member_id]
                if c.owned != dict(member.assigned_partitions) or c.owned != dict(group.target(c.member_id)):
                    return False
                owned += [(t, p) for t, ps in c.owned.items() for p in ps]
            if sorted(owned) != sorted(wanted):
                return False
        return True

    def run(self) -> None:
        try:
            for _ in range(self.steps):
                self.step()
                self.check()
            self.check_full_replay()
            for client in self.clients:
                if client.alive and client.paused:
                    client.paused = False
                    client.full = True
            for _ in range(80):
                if self.batched:
                    self._send_batch(self._live(), "ok")
                for client in [] if self.batched else self._live():
                    self._send(client, "ok")
                    self.check()
                if self.converged():
                    break
                self._advance(HEARTBEAT_MS)
            else:
                raise SimulationFailure("liveness: the groups did not converge")
            self.check_full_replay()
        except AssertionError as exc:
            tail = "\n".join(self.trace[-40:])
            raise SimulationFailure(
                f"seed {self.seed} failed: {exc}\nrerun alone: SIM_SEED={self.seed} pytest tests/sim -k seed\n"
                f"last steps:\n{tail}"
            ) from exc


def _with_ref(request: ConsumerGroupHeartbeat, ref: int) -> ConsumerGroupHeartbeat:
    return replace(request, ref=ref)


def compacted(log: list[Record]) -> list[Record]:
    """What log compaction keeps: the last record per key, in log order, without tombstones."""
    last: dict[tuple[int, bytes], int] = {}
    for index, record in enumerate(log):
        rtype, key, _ = encode_record(record)
        last[(rtype, key)] = index
    keep = sorted(last.values())
    return [log[i] for i in keep if log[i].value is not None]
