"""The packages of `coordinator/` and `protocol/` form layers, and imports point down.

The import graph is built from the source (every `import`, including function-local ones and those
under TYPE_CHECKING: a type-only import is still a dependency of the design). The test fails on an
import from a lower layer into a higher one, and on a cycle between packages of one layer, unless
the edge is in `KNOWN`: the debts of today's layout, written down so none can be added unnoticed
and each one removed is removed from here too (a `KNOWN` edge that no longer exists fails the test).
docs/ARCHITECTURE.md ("Layers") states the same order.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"protocol"}),                                   # the wire
    frozenset({"settings", "logging", "pipes", "metrics", "storage_errors"}),  # utilities every layer may use
    frozenset({"api"}),                                        # the API contract: imports the wire only
    frozenset({"core"}),                                       # pure state machines and records
    frozenset({"recordlog", "catalog"}),                       # the durable log; topic sources
    frozenset({"runtime"}),                                    # the machinery features run on
    frozenset({"dataplane", "security", "sidecar", "shards", "history", "admin", "clusterlog",
               "logtool", "share"}),                                    # features
    frozenset({"node", "config", "cli", "docs", "__main__"}),  # assembly and entry points
)

KNOWN: frozenset[tuple[str, str]] = frozenset()
"""None left: the APIs declare their authorization and placement as data (`api/`), security and
shards interpret them, and the connection drives SASL through `runtime/auth.py`'s interfaces."""


def layer_of(package: str) -> int:
    for index, members in enumerate(LAYERS):
        if package in members:
            return index
    raise AssertionError(f"package {package!r} is in no layer: add it to LAYERS and to docs/ARCHITECTURE.md")


def _package(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] == "protocol":
        return "protocol"
    if parts[0] != "coordinator" or len(parts) == 1:
        return None
    return parts[1]


def import_graph() -> dict[tuple[str, str], list[str]]:
    """(importing package, imported package) → the places (file:line) that make the edge."""
    edges: dict[tuple[str, str], list[str]] = {}
    sources = [*ROOT.glob("coordinator/**/*.py"), *ROOT.glob("protocol/**/*.py")]
    for path in sources:
        module_parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if module_parts[-1] == "__init__":
            module_parts.pop()
            package_parts = module_parts
        else:
            package_parts = module_parts[:-1]
        source = _package(".".join(module_parts))
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package_parts[:len(package_parts) - (node.level - 1)]
                    if node.module:
                        targets = [".".join([*base, node.module])]
                    else:
                        targets = [".".join([*base, alias.name]) for alias in node.names]
                elif node.module:
                    targets = [node.module]
            for target in targets:
                imported = _package(target)
                if source and imported and imported != source:
                    edges.setdefault((source, imported), []).append(
                        f"{path.relative_to(ROOT)}:{node.lineno}")
    return edges


def _cycles_within_layers(edges: set[tuple[str, str]]) -> list[list[str]]:
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        if layer_of(a) == layer_of(b):
            graph.setdefault(a, set()).add(b)
    found: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        for nxt in sorted(graph.get(node, ())):
            if nxt == path[0]:
                found.append([*path, nxt])
            elif nxt not in path and nxt > path[0]:  # each cycle once, from its smallest node
                visit(nxt, [*path, nxt])

    for start in sorted(graph):
        visit(start, [start])
    return found


def test_every_package_has_a_layer() -> None:
    packages = {a for a, _ in import_graph()} | {b for _, b in import_graph()}
    for package in packages:
        layer_of(package)
    assert "core" in packages and "runtime" in packages  # the graph sees the real packages


def test_imports_point_down_the_layers() -> None:
    edges = import_graph()
    upward = {edge: places for edge, places in edges.items() if layer_of(edge[0]) < layer_of(edge[1])}
    new = {edge: places[:3] for edge, places in upward.items() if edge not in KNOWN}
    assert new == {}, f"imports against the layer order (docs/ARCHITECTURE.md, Layers): {new}"


def test_no_cycle_between_packages_of_one_layer() -> None:
    edges = set(import_graph()) - KNOWN
    assert _cycles_within_layers(edges) == []


def test_every_known_debt_still_exists() -> None:
    """When a debt is paid, it leaves `KNOWN` in the same change: the list only shrinks."""
    assert sorted(KNOWN - set(import_graph())) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles_within_layers({("sidecar", "security"), ("security", "sidecar")}) == [
        ["security", "sidecar", "security"]]
