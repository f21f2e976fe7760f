"""Seeded simulations of KIP-848 groups (see ``scenario.py`` for the faults and ``checks.py`` for the checks).

The default suite runs a few dozen short seeds (a few seconds); ``pytest -m slow tests/sim`` runs long ones.
``SIM_SEED=<n>`` reruns one seed alone (``SIM_STEPS`` sets its length).
"""

from __future__ import annotations

import os

import pytest

from tests.sim.scenario import Simulation

ONE = os.environ.get("SIM_SEED")
SEEDS = [int(ONE)] if ONE else list(range(24))
STEPS = int(os.environ.get("SIM_STEPS", "250"))


@pytest.mark.parametrize("seed", SEEDS)
def test_consumer_groups_stay_safe_and_converge(seed: int) -> None:
    Simulation(seed, steps=STEPS, kinds=("consumer", "consumer")).run()


@pytest.mark.parametrize("seed", SEEDS)
def test_consumer_groups_in_runtime_batches(seed: int) -> None:
    """The same, with requests handled in runtime batches (deferred target assignment)."""
    Simulation(seed, steps=STEPS, kinds=("consumer", "consumer"), batched=True).run()


@pytest.mark.slow
@pytest.mark.timeout(3_600)
def test_long_consumer_seeds() -> None:
    for seed in range(1_000, 1_100):
        Simulation(seed, steps=1_500, kinds=("consumer",) * 3, max_clients=12).run()
        Simulation(seed, steps=1_500, kinds=("consumer",) * 3, max_clients=12, batched=True).run()
