"""The streams groups' warm-up counters follow the core's WarmupTasksChanged events."""

from __future__ import annotations

from prometheus_client import REGISTRY

from coordinator.core.events import WarmupTasksChanged
from coordinator.runtime.group_metrics import observer


def value(name: str) -> float:
    return REGISTRY.get_sample_value(name) or 0.0


def test_warmups_started_and_promoted_are_counted() -> None:
    started, promoted = value("coordinator_streams_warmups_started_total"), value("coordinator_streams_warmups_promoted_total")
    observe = observer(per_group_labels=False)
    observe(WarmupTasksChanged("app", "b", 3, started=2, promoted=0, dropped=0))
    observe(WarmupTasksChanged("app", "b", 4, started=0, promoted=1, dropped=1))
    assert value("coordinator_streams_warmups_started_total") == started + 2
    assert value("coordinator_streams_warmups_promoted_total") == promoted + 1
