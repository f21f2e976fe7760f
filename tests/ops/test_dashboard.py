"""The Grafana dashboard queries only metrics the server really exports: the real server process is
driven with a little traffic (a classic confluent-kafka group that joins, commits and leaves, a
produce and a fetch, a group deletion, a protocol error), /metrics is scraped, and every metric name
in every panel expression must be in the scrape, with samples unless it counts only rare events.
Label names a panel aggregates by must exist on the metric's samples too."""

from __future__ import annotations

import json
import re
import socket
import struct
from collections.abc import Iterator

import pytest

from coordinator.cli import main
from tests.ops.lockfile import ROOT
from tests.support.clients import make_member, poll_until, produce
from tests.support.server import ServerProcess, http_get

pytestmark = pytest.mark.interop

DASHBOARD = ROOT / "deploy" / "grafana" / "dashboards" / "coordinator.json"
SUFFIXES = ("_bucket", "_sum", "_count", "_total", "_created")
METRIC = re.compile(r"\b((?:coordinator|kafka_server|process|python)_[a-z0-9_]+)\b")
BY = re.compile(r"\bby\s*\(([^)]*)\)")
EVENT_ONLY = {
    "coordinator_session_expirations": "needs a member to miss its session timeout",
    "coordinator_offsets_deleted": "needs OffsetDelete or offset expiry",
    "coordinator_dataplane_produce_errors": "needs a refused Produce",
    "coordinator_dataplane_log_deleted_bytes": "needs retention to drop data",
    "coordinator_consumer_members_fenced": "needs a KIP-848 member to be fenced",
    "coordinator_log_compactions": "needs the record log to roll and be compacted",
}
"""Counters that have no labelled sample until a rare event happens; they must still be declared."""


def expressions() -> list[tuple[str, str]]:
    dashboard = json.loads(DASHBOARD.read_text())
    found = [(p["title"], t["expr"]) for p in dashboard["panels"] for t in p.get("targets", [])]
    assert len(found) >= 30
    return found


def base(name: str) -> str:
    """A sample or TYPE name without the suffix prometheus_client adds (counters declare `x_total`)."""
    for suffix in SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def family(name: str, families: set[str]) -> str | None:
    return base(name) if base(name) in families else None


@pytest.fixture(scope="module")
def scrape(tmp_path_factory) -> Iterator[str]:
    server = ServerProcess(tmp_path_factory.mktemp("dashboard") / "data", overrides={"topics": "traffic:2"})
    server.start()
    try:
        produce(server.bootstrap, "traffic", 20, 2)
        member = make_member(server.bootstrap, "dashboard-group", "dashboard-client", ["traffic"])
        poll_until([member], lambda: len(member.consumed) == 20, message="all records consumed")
        member.consumer.commit(asynchronous=False)
        member.close()
        # A KIP-848 member too, so the consumer-group series exist.
        modern = make_member(server.bootstrap, "dashboard-consumer-group", "dashboard-modern", ["traffic"],
                             **{"group.protocol": "consumer"})
        poll_until([modern], lambda: len(modern.consumed) == 20, message="all records consumed by a KIP-848 member")
        modern.close()
        with socket.create_connection(("127.0.0.1", server.port)) as bad:  # an unknown API key
            bad.sendall(struct.pack(">ihhi", 10, 9999, 0, 1) + b"\x00\x00")
            bad.settimeout(10)
            assert bad.recv(1) == b""
        # A second group, made by committing offsets with the admin CLI, then deleted.
        admin = ["--bootstrap", server.bootstrap]
        assert main(["offsets", "reset", "dashboard-deleted", "--topic", "traffic", "--to-latest", "--execute", *admin]) == 0
        assert main(["groups", "delete", "dashboard-deleted", *admin]) == 0
        status, body = http_get(server.metrics_port, "/metrics")
        assert status == 200
        yield body.decode()
    finally:
        server.stop()


def parse(text: str) -> tuple[set[str], dict[str, set[str]]]:
    """Declared metric families, and family → label names seen on its samples."""
    families = {base(line.split()[2]) for line in text.splitlines() if line.startswith("# TYPE ")}
    labels: dict[str, set[str]] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s", line)
        assert match, line
        name = family(match.group(1), families)
        if name is not None:
            labels.setdefault(name, set()).update(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="', match.group(2) or ""))
    return families, labels


def test_every_panel_queries_metrics_the_server_exports(scrape: str) -> None:
    families, labels = parse(scrape)
    problems = []
    for title, expr in expressions():
        names = METRIC.findall(expr)
        if not names:
            problems.append(f"{title}: no metric name in {expr}")
        for name in names:
            base = family(name, families)
            if base is None:
                problems.append(f"{title}: {name} is not exported")
            elif base not in labels and base not in EVENT_ONLY:
                problems.append(f"{title}: {name} has no samples after the traffic")
    assert not problems, "\n".join(problems)


def test_panels_aggregate_by_labels_their_metrics_have(scrape: str) -> None:
    families, labels = parse(scrape)
    problems = []
    for title, expr in expressions():
        bases = {family(n, families) for n in METRIC.findall(expr)} - {None}
        sampled = [labels[b] for b in bases if b in labels]
        if not sampled:
            continue
        for group in BY.findall(expr):
            for label in (part.strip() for part in group.split(",")):
                if label != "le" and not any(label in s for s in sampled):
                    problems.append(f"{title}: no sample of {sorted(bases)} has label {label}")
    assert not problems, "\n".join(problems)


def test_event_only_metrics_are_still_declared(scrape: str) -> None:
    families, _ = parse(scrape)
    assert set(EVENT_ONLY) <= families
    # Every event-only name is on the dashboard, or the exception is stale.
    used = {family(n, families) for _, e in expressions() for n in METRIC.findall(e)}
    assert set(EVENT_ONLY) <= used


def test_the_readme_metrics_reference_lists_exactly_what_the_server_exports(scrape: str) -> None:
    from coordinator.docs import metrics_table

    families, _ = parse(scrape)
    exported = {f for f in families if f.startswith(("coordinator_", "kafka_server_"))}
    documented = {base(name) for name in re.findall(r"^\| `([a-z0-9_]+)` \|", metrics_table(), re.M)}
    assert documented == exported
    assert metrics_table() in (ROOT / "README.md").read_text()
