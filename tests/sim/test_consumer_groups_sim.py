"""Seeded simulations of KIP-848 groups (see ``consumer_sim.py`` for the model and the checks).

CI runs a few dozen short seeds (a few seconds). ``pytest -m slow tests/sim`` runs many long ones.
``SIM_SEED=<n>`` reruns one seed alone (``SIM_STEPS`` sets its length).
"""

from __future__ import annotations

import os

import pytest

from tests.sim.consumer_sim import Simulation

ONE = os.environ.get("SIM_SEED")
SEEDS = [int(ONE)] if ONE else list(range(24))


@pytest.mark.parametrize("seed", SEEDS)
def test_seed(seed: int) -> None:
    Simulation(seed, steps=int(os.environ.get("SIM_STEPS", "250"))).run()


@pytest.mark.parametrize("seed", SEEDS)
def test_seed_batched(seed: int) -> None:
    """The same, with requests handled in runtime batches (deferred target assignment)."""
    Simulation(seed, steps=int(os.environ.get("SIM_STEPS", "250")), batched=True).run()


@pytest.mark.slow
@pytest.mark.timeout(3_600)
def test_long_seeds() -> None:
    for seed in range(1_000, 1_100):
        Simulation(seed, steps=1_500, groups=3, max_clients=12).run()
        Simulation(seed, steps=1_500, groups=3, max_clients=12, batched=True).run()
