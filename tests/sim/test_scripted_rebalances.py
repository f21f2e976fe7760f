"""Scripted (not random) rebalances of model classic clients, checked after every request like the
seeded runs: the protocol properties the random runs rely on, shown once step by step.

* cooperative (KIP-429): a newcomer gets partitions from an owner in TWO rebalances (the owner first
  revokes what moves, then rejoins so the partitions can be handed over), never owned twice between;
* eager: every member revokes everything before it rejoins, so the next generation starts from nothing;
* static: a member that restarts subscribed to more topics rebalances its group, so they get assigned
  (and, until they are, the liveness report says which partitions nobody owns and why).
"""

from __future__ import annotations

from tests.sim.classic_client import STABLE, ClassicClient
from tests.sim.consumer_client import ConsumerClient
from tests.sim.scenario import Simulation

Snapshot = tuple[frozenset[int], frozenset[int], int, int]  # a's and b's partitions and generations


class Scripted:
    """Two classic clients ``a`` and ``b`` of one kind on topic t0 (4 partitions); every check (after
    each request and timer) also records who owns what, so a test can look at the whole history."""

    def __init__(self, kind: str) -> None:
        self.sim = Simulation(0, steps=0, kinds=(kind,))
        self.a, self.b = (
            ClassicClient(name, "g0", ("t0",), "", cooperative=kind == "cooperative", protocols=("range",))
            for name in ("a", "b")
        )
        self.sim.clients += [self.a, self.b]
        self.history: list[Snapshot] = []
        check = self.sim.check

        def check_and_record() -> None:
            check()
            self.history.append((self.owned(self.a), self.owned(self.b), self.a.generation, self.b.generation))

        self.sim.check = check_and_record  # type: ignore[method-assign]

    def owned(self, client: ClassicClient) -> frozenset[int]:
        return frozenset(p for _, p in client.owned(self.sim.world))

    def talk(self, *clients: ClassicClient) -> None:
        for client in clients:
            self.sim.talk(client)
            self.sim.check()

    def settle(self) -> None:
        for _ in range(10):
            self.talk(self.a, self.b)
            if self.sim.converged():
                return
            self.sim.advance(500)
        raise AssertionError("the group did not settle")

    def start_with_a_alone(self) -> int:
        self.talk(self.a)  # MEMBER_ID_REQUIRED, then the join waits for the initial delay
        self.sim.advance(500)  # the delay ends: a leads, assigns itself everything, syncs
        assert self.a.phase == STABLE and self.owned(self.a) == {0, 1, 2, 3}
        self.history.clear()
        return self.a.generation


def test_cooperative_newcomer_gets_partitions_in_two_rebalances_never_owned_twice() -> None:
    group = Scripted("cooperative")
    generation = group.start_with_a_alone()
    group.talk(group.b)  # b's join starts a rebalance
    group.settle()

    a_final, b_final = group.owned(group.a), group.owned(group.b)
    assert len(a_final) == len(b_final) == 2 and a_final | b_final == {0, 1, 2, 3}
    assert group.a.generation == group.b.generation == generation + 2, "two rebalances"
    # a kept its partitions while it rejoined, and gave up only those that moved, once
    assert all(len(a) >= 2 for a, _, _, _ in group.history)
    # b got nothing in the first rebalance: the partitions moving to it were still a's
    first_round = [b for _, b, _, gen_b in group.history if gen_b == generation + 1]
    assert first_round and not any(first_round)
    # never owned twice (the checker raises on it; here explicitly)
    assert all(not (a & b) for a, b, _, _ in group.history)


def test_eager_members_revoke_everything_before_rejoining() -> None:
    group = Scripted("eager")
    generation = group.start_with_a_alone()
    group.talk(group.b)  # b's join starts a rebalance
    group.settle()

    assert group.owned(group.a) == {0, 1} and group.owned(group.b) == {2, 3}  # range: a before b
    assert group.a.generation == generation + 1, "one rebalance"
    # between its rejoin and the new assignment a owned nothing
    assert any(not a and gen_a == generation + 1 for a, _, gen_a, _ in group.history)
    assert all(not (a & b) for a, b, _, _ in group.history)


def settle(sim: Simulation, rounds: int = 20) -> None:
    """Every live client talks, then half a second passes, until the groups converge."""
    for _ in range(rounds):
        for client in [c for c in sim.clients if c.alive]:
            sim.talk(client)
            sim.check()
        if sim.converged():
            return
        sim.advance(500)
    raise AssertionError("the groups did not settle:\n" + "\n".join(sim.checker.unconverged(["g0"], sim.clients)))


def test_a_static_member_restarted_with_a_wider_subscription_gets_the_topics_it_added() -> None:
    """Seeds 50413 and 50445 of the shared-shard runs, step by step. A static member restarts (no
    LeaveGroup) under the same instance id, now also subscribed to t1, while its eager group is Stable
    with the same selected protocol. Kafka 4.0 answers without a rebalance; the restarted member takes
    its predecessor's t0 partitions, which fit its subscription, and the leader, which only watches
    t0, never assigns t1 (KAFKA-12759). Here the changed subscription rebalances the group."""
    sim = Simulation(0, steps=0, kinds=("eager",))
    a, b = (
        ClassicClient(name, "g0", ("t0",), "", cooperative=False, protocols=("range",), instance_id=f"i{name}")
        for name in ("a", "b")
    )
    sim.clients += [a, b]
    settle(sim)
    t0 = {p for _, p in a.owned(sim.world) | b.owned(sim.world)}
    assert t0 == {0, 1, 2, 3} and sim.world.shard.group("g0").state_name == "Stable"

    b.alive = False  # b's process stops; its slot stays until its session times out
    again = ClassicClient("b2", "g0", ("t0", "t1"), "", cooperative=False, protocols=("range",), instance_id="ib")
    sim.clients.append(again)
    sim.talk(again)
    # the liveness report names the group, what is wrong with it and where each client stands
    [report] = sim.checker.unconverged(["g0"], sim.clients)
    assert report.startswith("g0: classic group PreparingRebalance"), report
    assert "live clients that are not members ['b2']" in report
    assert "subscribed to but owned by nobody: t0[2,3] t1[0,1,2]" in report
    assert "b2 member - (static ib): JOIN at generation -1 (not a member), waiting on" in report

    settle(sim)
    t1 = sim.world.topics["t1"].topic_id
    assert {(t1, p) for p in range(3)} <= again.owned(sim.world)
    assert again.generation == a.generation == sim.world.shard.group("g0").generation_id


def test_a_downgrade_cut_short_by_a_coordinator_restart_still_rebalances() -> None:
    """Seed 50506 of the rolling migrations, step by step. A classic and a KIP-848 member share t0;
    the KIP-848 member's process stops and its session expires, so the group goes back to the classic
    protocol: a Stable classic group in the log (the classic member holding its half) and a rebalance
    in memory only, as in Kafka. The coordinator restarts before anyone rejoins. The loaded group
    still owes that rebalance, so the classic member is told to rejoin and ends up with all of t0."""
    sim = Simulation(0, steps=0, kinds=("mixed",))
    k = ClassicClient("k", "g0", ("t0",), "", cooperative=True, protocols=(), migrating=True)
    m = ConsumerClient("m", "g0", ("t0",), "", migrating=True)
    sim.clients += [k, m]
    settle(sim)
    group = sim.world.shard.group("g0")
    assert group is not None and group.group_type == "consumer"
    held_by_k = {p for _, p in k.owned(sim.world)}
    assert held_by_k and held_by_k != {0, 1, 2, 3}

    m.alive = False
    for _ in range(30):  # k keeps heartbeating while m's session runs out
        sim.talk(k)
        sim.advance(500)
        group = sim.world.shard.group("g0")
        if group is not None and group.group_type == "classic":
            break
    assert group is not None and group.group_type == "classic", "the group went back to the classic protocol"
    assert group.state_name == "PreparingRebalance"
    assert {p for _, p in k.owned(sim.world)} == held_by_k, "k has not heard of the rebalance yet"

    sim.world.restart()
    sim._restarted()
    loaded = sim.world.shard.group("g0")
    assert loaded is not None and loaded.state_name == "PreparingRebalance", "the loaded group owes it"

    settle(sim)
    assert {p for _, p in k.owned(sim.world)} == {0, 1, 2, 3}
