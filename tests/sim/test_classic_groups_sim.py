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
ROLLING_SEEDS = seeds(range(300, 316))
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
