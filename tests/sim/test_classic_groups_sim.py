"""Seeded simulations of classic groups: eager and cooperative (KIP-429) members speaking
JoinGroup/SyncGroup/Heartbeat/LeaveGroup, static members (KIP-345) in odd seeds, the assignment computed
by the model leader (``assignors.py``), under the same faults (``scenario.py``) and the same checks
(``checks.py``) as KIP-848 groups; and both kinds of groups in one shard under one checker.

``SIM_SEED=<n>`` reruns one seed alone (``SIM_STEPS`` sets its length); a failing seed prints the
exact command. ``pytest -m slow tests/sim`` runs long ones.
"""

from __future__ import annotations

import os

import pytest

from tests.sim.scenario import Simulation

ONE = os.environ.get("SIM_SEED")
SEEDS = [int(ONE)] if ONE else list(range(16))
MIXED_SEEDS = [int(ONE)] if ONE else list(range(100, 108))
LONG_SEEDS = [int(ONE)] if ONE else list(range(2_000, 2_100))
STEPS = int(os.environ.get("SIM_STEPS", "250"))
LONG_STEPS = int(os.environ.get("SIM_STEPS", "1500"))


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


ROLLING_SEEDS = [int(ONE)] if ONE else list(range(300, 316))


@pytest.mark.parametrize("seed", ROLLING_SEEDS)
def test_classic_and_consumer_members_in_one_group(seed: int) -> None:
    """A rolling upgrade and downgrade: cooperative classic and KIP-848 members in ONE group (online
    conversion both ways), under the same faults and checks: no partition owned by two members,
    epochs monotonic, replay equals live, then every group converges."""
    Simulation(seed, steps=STEPS, kinds=("mixed", "mixed")).run()


@pytest.mark.parametrize("seed", ROLLING_SEEDS[:8])
def test_rolling_migration_in_runtime_batches(seed: int) -> None:
    Simulation(seed, steps=STEPS, kinds=("mixed", "consumer", "cooperative"), batched=True).run()


@pytest.mark.slow
@pytest.mark.parametrize("seed", LONG_SEEDS)
def test_long_rolling_migrations(seed: int) -> None:
    Simulation(seed, steps=LONG_STEPS, kinds=("mixed", "mixed", "consumer"), max_clients=12).run()
