"""Seeded simulations of classic groups: eager and cooperative (KIP-429) members, static members
(KIP-345) in odd seeds, a KIP-848 group beside them in the same shard, all under the same checks
(see ``scenario.py`` for the faults and ``checks.py`` for the checks).

``SIM_SEED=<n>`` reruns one seed alone (``SIM_STEPS`` sets its length).
"""

from __future__ import annotations

import os

import pytest

from tests.sim.scenario import Simulation

ONE = os.environ.get("SIM_SEED")
SEEDS = [int(ONE)] if ONE else list(range(16))
STEPS = int(os.environ.get("SIM_STEPS", "250"))


@pytest.mark.parametrize("seed", SEEDS)
def test_eager_and_cooperative_groups_stay_safe_and_converge(seed: int) -> None:
    Simulation(seed, steps=STEPS, kinds=("eager", "cooperative")).run()


@pytest.mark.parametrize("seed", SEEDS[:8])
def test_classic_and_consumer_groups_share_one_shard(seed: int) -> None:
    """Every client type in one scenario and one shard, one checker over all of them."""
    Simulation(seed, steps=STEPS, kinds=("eager", "cooperative", "consumer")).run()


@pytest.mark.slow
@pytest.mark.timeout(3_600)
def test_long_classic_seeds() -> None:
    for seed in range(2_000, 2_100):
        Simulation(seed, steps=1_500, kinds=("eager", "cooperative", "eager", "consumer"), max_clients=12).run()
