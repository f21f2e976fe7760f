"""Hypothesis drives a streams group through heartbeats alone: members of both versions join,
heartbeat in any order, leave or time out, and restore their warm-ups at their own pace. After
every step the records replay to the live group and no task is active on two members (the
harness checks both); the warm-ups restoring never exceed the budget; and once the membership
settles, the group converges: every member runs exactly its target, no warm-up left."""

from __future__ import annotations

import random

from hypothesis import event, given, settings
from hypothesis import strategies as st

from coordinator.core.errors import CoordinatorError, ErrorCode
from tests.core.streams.harness import SETTINGS, Client, Coordinator


def beat(coordinator: Coordinator, client: Client) -> None:
    try:
        coordinator.beat(client)
    except CoordinatorError as e:
        # The Java client drops its tasks and rejoins on these; anything else is a bug here.
        assert e.code in (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID), (e.code, e.message)
        client.epoch = 0
        client.active = client.standby = client.warmup = frozenset()


OPERATIONS = st.lists(st.sampled_from(["join", "beat", "beat", "beat", "leave", "expire", "restart"]),
                      min_size=1, max_size=40)


def drive(rng: random.Random, operations: list[str]) -> tuple[Coordinator, list[Client]]:
    """Plays the operations; checks the warm-up budget after each."""
    coordinator = Coordinator()
    clients: list[Client] = []
    names = iter(f"m{i}" for i in range(1000))
    for operation in operations:
        if operation == "join" or not clients:
            name = next(names)
            client = Client(name, api_version=rng.choice([0, 1]), restore_per_heartbeat=rng.choice([0, 300, 1000]),
                            instance_id=f"i-{name}" if rng.random() < 0.5 else None)
            clients.append(client)
            beat(coordinator, client)
        elif operation == "restart":  # a static member leaves for a while and comes back under a new id
            old = rng.choice(clients)
            if old.instance_id is not None and old.epoch > 0:
                old.epoch = -2
                beat(coordinator, old)
                clients.remove(old)
                client = Client(next(names), api_version=old.api_version, instance_id=old.instance_id,
                                process_id=old.process_id, restore_per_heartbeat=old.restore_per_heartbeat)
                clients.append(client)
                beat(coordinator, client)
        elif operation == "beat":
            beat(coordinator, rng.choice(clients))
        elif operation == "leave":
            client = clients.pop(rng.randrange(len(clients)))
            if client.epoch > 0:
                client.epoch = -1
                beat(coordinator, client)
        elif coordinator.group is not None:  # a session times out: the client finds out and rejoins
            coordinator.expire(rng.choice(clients).member_id)
        if coordinator.soft.refined is not None:
            assert sum(len(t.warmup) for t in coordinator.soft.refined[1].values()) <= SETTINGS.num_warmup_replicas
    return coordinator, clients


def converges(coordinator: Coordinator, clients: list[Client], step_ms: int = 0) -> None:
    """Every client heartbeats in rounds (the clock moving ``step_ms`` more each round): within 60
    rounds every member runs exactly its target, no warm-up left."""
    group = coordinator.group
    for rounds in range(60):
        coordinator.now += step_ms
        for client in clients:
            beat(coordinator, client)
        group = coordinator.group
        assert group is not None
        if group.state_name in ("Stable", "Empty") and all(
                c.member_id in group.members
                and group.members[c.member_id].assigned.tasks() == group.targets.get(c.member_id) for c in clients):
            event(f"rounds to converge: {min(rounds, 10)}{'+' if rounds >= 10 else ''}")
            break
    else:
        raise AssertionError(f"did not converge: {group.members if group else None}")
    assert set(group.members) == {c.member_id for c in clients}


@given(st.integers(0, 2**32), OPERATIONS)
@settings(max_examples=150)
def test_any_sequence_of_joins_heartbeats_and_departures_keeps_the_invariants_and_converges(
        seed: int, operations: list[str]) -> None:
    coordinator, clients = drive(random.Random(seed), operations)
    for client in clients:
        client.restore_per_heartbeat = max(client.restore_per_heartbeat, 300)  # everyone restores eventually
    converges(coordinator, clients)


@given(st.integers(0, 2**32), OPERATIONS)
@settings(max_examples=100)
def test_warm_ups_that_never_catch_up_still_end_once_their_moves_stall(seed: int, operations: list[str]) -> None:
    """Some newcomers never restore (offset 0), some report the trunk client's Long.MAX_VALUE end
    offset (an empty changelog): with time passing, every warm-up still ends and the group reaches
    its target."""
    rng = random.Random(seed)
    coordinator, clients = drive(rng, operations)
    for client in clients:
        if rng.random() < 0.5:
            client.end = 2**63 - 1
        client.restore_per_heartbeat = rng.choice([0, 0, 300])
        event(f"end {'unknown' if client.end > client.END else 'known'}, restores {client.restore_per_heartbeat}")
    converges(coordinator, clients, 2 * max(SETTINGS.task_offset_interval_ms, SETTINGS.heartbeat_interval_ms))
