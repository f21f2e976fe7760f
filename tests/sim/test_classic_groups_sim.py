"""Seeded simulations of classic groups: eager and cooperative (KIP-429) members speaking
JoinGroup/SyncGroup/Heartbeat/LeaveGroup, static members (KIP-345) in odd seeds, the assignment computed
by the model leader (``assignors.py``), under the same faults (``scenario.py``) and the same checks
(``checks.py``) as KIP-848 groups; and both kinds of groups in one shard under one checker.

``SIM_SEED=<n>`` reruns one seed alone (``SIM_STEPS`` sets its length); a failing seed prints the
exact command. ``pytest -m slow tests/sim`` runs long ones, and every scenario over 1,000 more seeds
(``seeds.py``).
"""

from __future__ import annotations

import pytest

from tests.sim.scenario import Simulation
from tests.sim.seeds import LONG_STEPS, STEPS, only, seeds

SEEDS = seeds(range(16))
MIXED_SEEDS = seeds(range(100, 108))
# 1,000 seeds of 1,500 steps: about 5 CPU-minutes (classic), 14 (rolling migrations)
LONG_SEEDS = only(range(2_000, 3_000))
# Kafka has the same gap: a downgrade whose rebalance a coordinator restart cuts short. The last
# KIP-848 member's session expires; the group becomes a Stable classic group (durable) whose
# rebalance starts in memory only, as in Kafka; the coordinator restarts before it completes, so the
# loaded group is Stable at the downgrade's generation, its one member holds t0 (the expired member
# held t1), was never told it leads (a classic member of a consumer group hears leader ''), and
# nobody ever rejoins: t1 stays unassigned.
DOWNGRADE_REBALANCE_LOST = (
    "liveness: a coordinator restart loses the rebalance a downgrade started (Kafka too); "
    "the classic group keeps the expired member's t1 unassigned"
)
ROLLING_SEEDS = seeds(range(300, 316), known={50506: DOWNGRADE_REBALANCE_LOST})
BATCHED_ROLLING_SEEDS = seeds(range(300, 308))


@pytest.mark.parametrize("seed", SEEDS)
def test_eager_and_cooperative_groups_stay_safe_and_converge(seed: int) -> None:
    Simulation(seed, steps=STEPS, kinds=("eager", "cooperative")).run()


@pytest.mark.parametrize("seed", MIXED_SEEDS)
def test_classic_and_consumer_groups_share_one_shard(seed: int) -> None:
    """Every client type in one scenario and one shard, one checker over all of them."""
    Simulation(seed, steps=STEPS, kinds=("eager", "cooperative", "consumer")).run()


@pytest.mark.slow
@pytest.mark.parametrize("seed", LONG_SEEDS)
def test_long_classic_runs(seed: int) -> None:
    Simulation(seed, steps=LONG_STEPS, kinds=("eager", "cooperative", "eager", "consumer"), max_clients=12).run()


@pytest.mark.parametrize("seed", ROLLING_SEEDS)
def test_classic_and_consumer_members_in_one_group(seed: int) -> None:
    """A rolling upgrade and downgrade: cooperative classic and KIP-848 members in ONE group (online
    conversion both ways), under the same faults and checks: no partition owned by two members,
    epochs monotonic, replay equals live, then every group converges."""
    Simulation(seed, steps=STEPS, kinds=("mixed", "mixed")).run()


@pytest.mark.parametrize("seed", BATCHED_ROLLING_SEEDS)
def test_rolling_migration_in_runtime_batches(seed: int) -> None:
    Simulation(seed, steps=STEPS, kinds=("mixed", "consumer", "cooperative"), batched=True).run()


@pytest.mark.slow
@pytest.mark.parametrize("seed", LONG_SEEDS)
def test_long_rolling_migrations(seed: int) -> None:
    Simulation(seed, steps=LONG_STEPS, kinds=("mixed", "mixed", "consumer"), max_clients=12).run()
