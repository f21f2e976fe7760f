"""Generated documentation: the supported-API table, the configuration and metrics references.

Each is produced from the registries the server itself uses (the API registry, `config.KEYS`, and
the Prometheus registry as filled by importing the server's modules), and `python -m coordinator.docs`
rewrites the marked sections of README.md; a test fails when the README is stale.
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

from protocol.private import NAMES as PRIVATE_APIS

from .config import reference_table, resolve

README = Path(__file__).resolve().parent.parent / "README.md"


def api_table() -> str:
    from .node.server import CoordinatorServer

    with tempfile.TemporaryDirectory() as tmp:
        config = resolve(environ={}, flags={"log.dirs": tmp})
        server = CoordinatorServer(config)
        lines = ["| API | key | versions |", "|---|---|---|"]
        for handler in server.registry:
            name = f"{handler.name} (private: never advertised)" if handler.api_key in PRIVATE_APIS else handler.name
            lines.append(f"| {name} | {handler.api_key} | {handler.min_version}–{handler.max_version} |")
    return "\n".join(lines)


def metrics_table() -> str:
    """Every `coordinator_*` and Kafka-mirrored `kafka_server_*` metric: exposed name, type, labels, help.

    Importing the server module imports every module that defines metrics at module level; our own
    collectors (request statistics, scrape-time group gauges) are asked for their families. The group
    gauges' and the Kafka-mirrored collectors are only registered when a server starts, so
    unregistered instances of them are asked as well."""
    from prometheus_client import REGISTRY
    from prometheus_client.metrics import MetricWrapperBase

    from .node import serve  # noqa: F401 - imported (with the server) for the metrics its modules define
    from .runtime.group_metrics import ShardCollector
    from .runtime.kafka_metrics import KafkaCoordinatorCollector
    from .security import sasl  # noqa: F401 - imported by the listener gates only when a SASL connection comes

    rows: dict[str, tuple[str, tuple[str, ...], str]] = {}
    suffix = {"counter": "_total"}
    # The registered shard collectors report the shard a server in this process last pointed them
    # at (in tests, one built with extra group types): the reference is the built-in types', from
    # unregistered instances pointed at no shard.
    shard_collectors = (ShardCollector, KafkaCoordinatorCollector)
    collectors = [*(c for c in REGISTRY._collector_to_names if not isinstance(c, shard_collectors)),
                  ShardCollector(lambda: None), KafkaCoordinatorCollector(lambda: None, lambda: False)]
    for collector in collectors:
        if isinstance(collector, MetricWrapperBase):
            name, kind = collector._name, str(collector._type)
            rows[name + suffix.get(kind, "")] = (kind, tuple(collector._labelnames), collector._documentation)
        elif type(collector).__module__.startswith("coordinator."):  # our own scrape-time collectors
            for family in collector.collect():
                labels = tuple(getattr(family, "_labelnames", ()))
                rows[family.name + suffix.get(family.type, "")] = (family.type, labels, family.documentation)
    lines = ["| metric | type | labels | meaning |", "|---|---|---|---|"]
    for name, (kind, labels, doc) in sorted(rows.items()):
        if name.startswith(("coordinator_", "kafka_server_")):
            lines.append(f"| `{name}` | {kind} | {', '.join(labels) or '—'} | {doc} |")
    return "\n".join(lines)


SECTIONS = {"apis": api_table, "config": reference_table, "metrics": metrics_table}


def render(text: str) -> str:
    for name, produce in SECTIONS.items():
        pattern = re.compile(rf"(<!-- {name}:start -->\n)(?:.*?\n)?(<!-- {name}:end -->)", re.S)
        body = produce() + "\n"
        text = pattern.sub(lambda m: f"{m.group(1)}{body}{m.group(2)}", text)  # noqa: B023 - used at once
    return text


def main() -> int:
    text = README.read_text()
    updated = render(text)
    if updated != text:
        README.write_text(updated)
        print("README.md updated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
