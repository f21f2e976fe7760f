"""Seeded simulations of KIP-848 consumer groups: model librdkafka clients against the pure core under
faults (``scenario.py``), every step checked (``checks.py``).

The default suite runs short seeds (a few seconds); ``pytest -m slow tests/sim`` runs long ones, and
every scenario over 1,000 more seeds (``seeds.py``).
``SIM_SEED=<n>`` reruns one seed alone (``SIM_STEPS`` sets its length); a failing seed prints the
exact command.
"""

from __future__ import annotations

import pytest

from tests.sim.scenario import Simulation
from tests.sim.seeds import LONG_STEPS, STEPS, only, seeds

SEEDS = seeds(range(24))
LONG_SEEDS = only(range(1_000, 1_100))


@pytest.mark.parametrize("seed", SEEDS)
def test_consumer_groups_stay_safe_and_converge(seed: int) -> None:
    Simulation(seed, steps=STEPS, kinds=("consumer", "consumer")).run()


@pytest.mark.parametrize("seed", SEEDS)
def test_consumer_groups_in_runtime_batches(seed: int) -> None:
    """The same, with requests handled in runtime batches (a heartbeat may wait for its group's one
    target assignment at the end of the batch)."""
    Simulation(seed, steps=STEPS, kinds=("consumer", "consumer"), batched=True).run()


@pytest.mark.slow
@pytest.mark.parametrize("seed", LONG_SEEDS)
def test_long_consumer_runs(seed: int) -> None:
    Simulation(seed, steps=LONG_STEPS, kinds=("consumer",) * 3, max_clients=12).run()
    Simulation(seed, steps=LONG_STEPS, kinds=("consumer",) * 3, max_clients=12, batched=True).run()
