"""The job's physical plan is the one `pipeline.tables` describes: the events are shuffled once, by
group, and nothing sorts or windows over all rows (no range partitioning, no single partition)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.rebalance_report import TABLES, build, load
from pipeline.synthetic import generate


def _nodes(plan: Any, cached: bool = True) -> list[Any]:
    """Every node of a physical plan, those of adaptive stages included, and those of the plans of
    the persisted frames it reads if `cached`."""
    name = plan.nodeName()
    inner = []
    if name.startswith("AdaptiveSparkPlan"):
        inner = [plan.executedPlan()]
    elif "QueryStage" in name:
        inner = [plan.plan()]
    elif name == "InMemoryTableScan" and cached:
        inner = [plan.relation().cachedPlan()]
    children = plan.children()
    found = [plan]
    for child in [*inner, *(children.apply(i) for i in range(children.size()))]:
        found += _nodes(child, cached)
    return found


def test_events_are_shuffled_once_by_group_and_nothing_is_global(spark: Any, tmp_path: Path) -> None:
    generate(5_000, 20, tmp_path / "history", days=2)
    tables = build(load(spark, [tmp_path / "history"]), 4)
    try:
        event_shuffles: set[str] = set()
        for name in TABLES:
            for node in _nodes(getattr(tables, name)._jdf.queryExecution().executedPlan()):
                text = node.simpleString(1000)
                # A global sort needs range partitioning, a window or sort over all rows one partition.
                assert "rangepartitioning" not in text and "SinglePartition" not in text, (name, text)
                if node.nodeName() == "Window":
                    assert node.partitionSpec().size() > 0, (name, text)
                # A shuffle of events: its input comes from the file scan, not from a persisted aggregate.
                if node.nodeName() == "Exchange" and any(n.nodeName().startswith("Scan ") for n in _nodes(node, False)):
                    event_shuffles.add(text.split(", [plan_id")[0])
        # The same exchange (the persisted `facts` frame's) under every table, and no other.
        assert len(event_shuffles) == 1, event_shuffles
        assert event_shuffles.pop().startswith("Exchange hashpartitioning(group_id#")
    finally:
        for frame in tables.cached:
            frame.unpersist()
