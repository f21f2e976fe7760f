"""A seeded simulation: model clients of any protocol against one pure coordinator shard.

Each group has a kind: ``consumer`` (KIP-848 clients), ``eager`` or ``cooperative`` (classic clients,
dynamic, or static in the seeds that allow it), or ``mixed``: cooperative classic clients and KIP-848
clients in ONE group (a rolling upgrade and downgrade, ``coordinator/core/migration.py``): the group
is created by whichever comes first, upgraded when a KIP-848 client joins a classic group, and
converted back when its last KIP-848 member goes; clients of a mixed group are also *migrated*: one
leaves and comes back speaking the other protocol. A scenario holds clients of every kind in one list
and drives them through the ``ModelClient`` interface only.

Steps, chosen by the seed: one client talks (sends its next request), or a poll round of one group
(each of its clients talks once), or time passes; clients an answer tells to go on (the classic join
loop) do so at once. Faults: lost responses (the request was applied, the client retries), requests
applied twice (the answer never came, the client retried at once, in a runtime batch maybe the same
one), coordinator crashes that lose the last unacknowledged write, coordinator restarts, request
timeouts on parked requests, clients that crash (no leave: the session timeout must remove them) and
static members that come back under the same instance id, pause and resume, leave, subscription
changes (names and regexes), topic creation, partition growth and topic deletion, time passing (session,
rebalance, join and sync timers). With ``batched``, KIP-848 requests go to the shard in runtime batches.

After every step, ``Checker.check`` (see ``checks.py``). Then a liveness phase without faults: every
live client talks each heartbeat interval until every group converges.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from .checks import Checker
from .classic_client import ClassicClient
from .consumer_client import ConsumerClient
from .model import ModelClient
from .world import HEARTBEAT_MS, SimulationFailure, World

SUBSCRIPTIONS: list[tuple[tuple[str, ...], str]] = [
    (("t0",), ""),
    (("t0", "t1"), ""),
    (("t1",), ""),
    (("t2",), ""),  # created later by the simulation
    ((), "t.*"),
    (("t3",), "t[01]"),
]
KINDS = ("consumer", "eager", "cooperative", "mixed")
REQUEST_TIMEOUT_MS = 30_000


class Simulation:
    def __init__(
        self, seed: int, steps: int, kinds: Sequence[str] = ("consumer", "consumer"), max_clients: int = 8,
        batched: bool = False, static: bool | None = None,
    ) -> None:
        assert all(k in KINDS for k in kinds), kinds
        self.world = World(seed)
        self.rng = self.world.rng
        self.seed = seed
        self.steps = steps
        self.kinds = {f"g{i}": kind for i, kind in enumerate(kinds)}
        self.max_clients = max_clients
        self.batched = batched
        # static members (group.instance.id) in half of the seeds, unless the caller says
        self.static = seed % 2 == 1 if static is None else static
        self.clients: list[ModelClient] = []
        self.next_client = 0
        self.checker = Checker(self.world)
        for name, partitions in (("t0", 4), ("t1", 3), ("t3", 2)):
            self.world.create_topic(name, partitions, post=False)
        self.world.post_catalog()

    # ---- clients ----------------------------------------------------------------------------------------

    def _new_client(
        self, group_id: str | None = None, instance_id: str | None = None, speaks: str | None = None
    ) -> ModelClient:
        self.next_client += 1
        group_id = group_id or self.rng.choice(sorted(self.kinds))
        kind = self.kinds[group_id]
        names, regex = self.rng.choice(SUBSCRIPTIONS)
        client: ModelClient
        if kind == "mixed":
            # Dynamic members, classic ones cooperative (what a rolling upgrade of a real group uses).
            speaks = speaks or self.rng.choice(["consumer", "classic"])
            if speaks == "consumer":
                client = ConsumerClient(f"m{self.next_client}", group_id, names, regex, migrating=True)
            else:
                client = ClassicClient(
                    f"k{self.next_client}", group_id, names, regex, cooperative=True, protocols=(), migrating=True,
                )
        elif kind == "consumer":
            client = ConsumerClient(f"m{self.next_client}", group_id, names, regex)
        else:
            if instance_id is None and self.static and self.rng.random() < 0.5:
                instance_id = f"i{self.next_client}"
            protocols = ("range", "roundrobin") if self.rng.random() < 0.5 else ("roundrobin", "range")
            prefix = "s" if instance_id else ("k" if kind == "cooperative" else "e")
            client = ClassicClient(
                f"{prefix}{self.next_client}", group_id, names, regex, cooperative=kind == "cooperative",
                protocols=protocols, instance_id=instance_id,
            )
        self.clients.append(client)
        self.world.note(f"{client.name} starts in {group_id} ({kind}) with {names} {regex!r}")
        return client

    def _live(self) -> list[ModelClient]:
        return [c for c in self.clients if c.alive and not c.paused]

    # ---- steps ------------------------------------------------------------------------------------------

    def check(self) -> None:
        self.checker.check(self.clients)

    def talk(self, client: ModelClient, fate: str = "ok") -> None:
        """``client`` sends its next request (if it has one), then everyone told to go on does."""
        request = client.next_request(self.world)
        if request is None:
            if client.waiting is not None and self.world.now - client.sent_at >= REQUEST_TIMEOUT_MS:
                self.world.note(f"{client.name} times out its request")
                client.give_up(self.world)
            return
        restarts = self.world.restarts
        self.world.send(client, request, fate)
        if self.world.restarts != restarts:
            self._restarted()
        self._follow_ups()

    def _follow_ups(self) -> None:
        """Clients that an answer (maybe to a parked request) told to go on do so at once."""
        for _ in range(50):
            ready = [c for c in self.clients if c.follow_up and c.alive and not c.paused and c.waiting is None]
            if not ready:
                return
            for client in ready:
                client.follow_up = False
                request = client.next_request(self.world)
                if request is not None:
                    self.world.send(client, request, "ok")
                    self.check()
        raise SimulationFailure("clients keep following up without end")

    def _talk_batch(self, clients: Sequence[ModelClient], fate: str, duplicate: bool) -> None:
        sent = [(c, r) for c in clients if (r := c.next_request(self.world)) is not None]
        if not sent:
            return
        restarts = self.world.restarts
        self.world.send_batch(sent, fate, self.check, retry=duplicate)  # retry: the same member twice
        if self.world.restarts != restarts:
            self._restarted()
        self._follow_ups()

    def advance(self, ms: int) -> None:
        self.world.advance(ms, self.check)
        self._follow_ups()  # a timer may have completed a barrier: the answered go on at once

    def _restarted(self) -> None:
        for client in self.clients:
            client.on_coordinator_restart()

    def step(self) -> None:
        world = self.world
        live = self._live()
        roll = self.rng.random()
        if roll < 0.08 or not live:
            if len([c for c in self.clients if c.alive]) < self.max_clients:
                self._new_client()
            return
        if roll < 0.14:
            # a poll-loop round of one group: each of its live clients talks once (a barrier can complete)
            group_id = self.rng.choice(sorted(self.kinds))
            world.note(f"round of {group_id}")
            for client in [c for c in live if c.group_id == group_id]:
                if client.alive and not client.paused:
                    self.talk(client, self.rng.choices(["ok", "lost"], [95, 5])[0])
                    self.check()
        elif roll < 0.62:
            consumers = [c for c in live if isinstance(c, ConsumerClient) and c.waiting is None]
            if self.batched and consumers and self.rng.random() < 0.7:
                clients = self.rng.sample(consumers, self.rng.randint(1, min(len(consumers), 5)))
                fate = self.rng.choices(["ok", "lost", "crash"], [86, 10, 4])[0]
                self._talk_batch(clients, fate, duplicate=self.rng.random() < 0.06)
            else:
                fate = self.rng.choices(["ok", "lost", "duplicate", "crash"], [80, 10, 6, 4])[0]
                self.talk(self.rng.choice(live), fate)
        elif roll < 0.75:
            self.advance(self.rng.choice([200, 500, 1_000, 3_000, 7_000]))
        elif roll < 0.79:
            client = self.rng.choice(live)
            if client.waiting is None and client.leave():
                world.note(f"{client.name} leaves")
                self.talk(client, "ok")
                if self.kinds[client.group_id] == "mixed" and self.rng.random() < 0.7:
                    self._migrate(client)
            elif client.waiting is None:
                self._crash(client)
        elif roll < 0.82:
            self._crash(self.rng.choice(live))
        elif roll < 0.85:
            client = self.rng.choice(live)
            client.paused = True
            world.note(f"{client.name} pauses")
        elif roll < 0.88:
            paused = [c for c in self.clients if c.alive and c.paused]
            if paused:
                client = self.rng.choice(paused)
                client.resume()
                world.note(f"{client.name} resumes")
        elif roll < 0.92:
            client = self.rng.choice(live)
            names, regex = self.rng.choice(SUBSCRIPTIONS)
            client.subscribe(names, regex)
            world.note(f"{client.name} subscribes to {names} {regex!r}")
        elif roll < 0.95:
            self._topic_change()
        elif roll < 0.97:
            world.note("coordinator restarts")
            world.restart()
            self._restarted()
            self._follow_ups()
        else:
            self.advance(self.rng.choice([10_000, 12_000]))

    def _migrate(self, client: ModelClient) -> None:
        """A rolling upgrade (or downgrade) step: the client that left comes back speaking the other
        protocol."""
        speaks = "classic" if isinstance(client, ConsumerClient) else "consumer"
        again = self._new_client(client.group_id, speaks=speaks)
        self.world.note(f"{again.name} restarts {client.name} with the {speaks} protocol")

    def _crash(self, client: ModelClient) -> None:
        client.alive = False
        self.world.note(f"{client.name} crashes")
        instance_id = client.instance_id
        if instance_id is not None and self.rng.random() < 0.7:
            again = self._new_client(client.group_id, instance_id)
            self.world.note(f"{again.name} restarts {client.name} as {instance_id}")

    def _topic_change(self) -> None:
        world = self.world
        kind = self.rng.choice(["create", "grow", "grow", "delete"])
        if kind == "create" and "t2" not in world.topics:
            info = world.create_topic("t2", self.rng.randint(1, 4))
            world.note(f"topic t2 created with {info.num_partitions}")
        elif kind == "grow" and world.topics:
            name = self.rng.choice(sorted(world.topics))
            info = world.grow_topic(name)
            world.note(f"topic {name} grows to {info.num_partitions}")
        elif kind == "delete" and "t2" in world.topics:
            world.delete_topic("t2")
            world.note("topic t2 deleted")

    def _kind(self, report: str) -> str:
        """The report with its group's kind after the group id (``g0 (eager): ...``)."""
        group_id, rest = report.split(":", 1)
        return f"{group_id} ({self.kinds[group_id]}):{rest}"

    # ---- the run ----------------------------------------------------------------------------------------

    def converged(self) -> bool:
        return self.checker.converged(sorted(self.kinds), self.clients)

    def run(self) -> None:
        try:
            for _ in range(self.steps):
                self.step()
                self.check()
            self.checker.check_full_replay()
            for client in self.clients:
                if client.alive and client.paused:
                    client.resume()
            for _ in range(120):
                live = self._live()
                consumers = [c for c in live if isinstance(c, ConsumerClient)]
                if self.batched and consumers:
                    self._talk_batch(consumers, "ok", duplicate=False)
                for client in live:
                    if not (self.batched and isinstance(client, ConsumerClient)):
                        self.talk(client, "ok")
                        self.check()
                if self.converged():
                    break
                self.advance(HEARTBEAT_MS)
            else:
                reports = self.checker.unconverged(sorted(self.kinds), self.clients)
                raise SimulationFailure(
                    f"liveness: {len(reports)} group(s) did not converge in 120 heartbeat intervals"
                    f" without faults:\n" + "\n".join(self._kind(report) for report in reports)
                )
            self.checker.check_full_replay()
        except AssertionError as exc:
            tail = "\n".join(self.world.trace[-40:])
            test = os.environ.get("PYTEST_CURRENT_TEST", "tests/sim").split("[")[0].split(" ")[0]
            raise SimulationFailure(
                f"seed {self.seed} failed: {exc}\nrerun alone: SIM_SEED={self.seed} pytest '{test}'\n"
                f"last steps:\n{tail}"
            ) from exc
