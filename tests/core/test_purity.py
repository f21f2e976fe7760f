"""``coordinator.core`` must stay pure: no I/O, clocks, randomness, id generation or runtime libraries.

Checked twice: each core module's own imports, and everything the core reaches through other
modules of the project (transitively, package ``__init__`` modules included): no module the core
imports, directly or through another, belongs to a package above it (security, runtime, sidecar,
dataplane, shards, ...) or imports a forbidden library itself.

Decision on ``uuid``: the core may name the ``uuid.UUID`` *type* (topic ids of KIP-848 records) but only
as ``from uuid import UUID``; ``import uuid`` (and with it ``uuid4``) is forbidden, so the core cannot
generate ids. Ids come in on requests (e.g. ``JoinGroup.new_member_id``).
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "coordinator" / "core"

FORBIDDEN = {
    "asyncio",
    "socket",
    "time",
    "random",
    "uuid",
    "kio",
    "structlog",
    "prometheus_client",
    "threading",
    "os",
    "secrets",
    "datetime",
    "selectors",
    "subprocess",
}
ALLOWED_FROM_IMPORTS = {("uuid", "UUID")}


def _violations(path: Path) -> list[str]:
    return _violations_in(path, path.read_text())


@functools.cache  # every core module's walk reads the same files: each text is parsed once a run
def _violations_in(path: Path, text: str) -> list[str]:
    tree = ast.parse(text, filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in FORBIDDEN:
                    found.append(f"{path.name}:{node.lineno} import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            root = node.module.split(".")[0]
            if root in FORBIDDEN:
                for alias in node.names:
                    if (node.module, alias.name) not in ALLOWED_FROM_IMPORTS:
                        found.append(f"{path.name}:{node.lineno} from {node.module} import {alias.name}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "__import__":
            found.append(f"{path.name}:{node.lineno} __import__()")
    return found


SOURCES = sorted(CORE.rglob("*.py"))


def test_core_has_sources() -> None:
    assert len(SOURCES) > 5


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(CORE)))
def test_core_module_is_pure(path: Path) -> None:
    assert _violations(path) == []


def test_checker_catches_forbidden_imports(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import time\nimport os.path\nfrom uuid import uuid4\nfrom asyncio import sleep\n")
    assert len(_violations(bad)) == 4
    ok = tmp_path / "ok.py"
    ok.write_text("from uuid import UUID\nimport msgspec\n")
    assert _violations(ok) == []


# ---- transitively ----------------------------------------------------------------------------------

OUTSIDE_THE_CORE = frozenset({
    "security", "runtime", "sidecar", "dataplane", "shards", "recordlog", "catalog", "clusterlog",
    "history", "admin", "node", "api", "config", "cli", "docs", "logtool", "__main__",
})
"""Packages (and modules) of ``coordinator`` the core may not reach: every feature, the runtime and
the assembly. (It may reach the utilities below it: ``settings`` for its setting declarations.)"""


def _module_path(root: Path, module: str) -> Path | None:
    base = root.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _project_imports(root: Path, module: str, path: Path) -> frozenset[str]:
    return _project_imports_in(root, module, path, path.read_text())


@functools.cache
def _project_imports_in(root: Path, module: str, path: Path, text: str) -> frozenset[str]:
    """The project modules ``module`` imports (any import, function-local and TYPE_CHECKING ones too),
    each with the packages above it (importing ``a.b.c`` runs ``a/__init__`` and ``a/b/__init__``)."""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(text, filename=str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - (node.level - 1)] if node.level else []
            head = [*base, *(node.module.split(".") if node.module else [])]
            names = [".".join(head)] + [".".join([*head, alias.name]) for alias in node.names]
        for name in names:
            parts = name.split(".")
            for end in range(1, len(parts) + 1):
                prefix = ".".join(parts[:end])
                if _module_path(root, prefix) is not None:
                    found.add(prefix)
    return frozenset(found)


def reachable(root: Path, start: str) -> dict[str, list[str]]:
    """Every project module ``start`` reaches, with the chain of imports that reaches it."""
    chains: dict[str, list[str]] = {start: [start]}
    todo = [start]
    while todo:
        module = todo.pop()
        path = _module_path(root, module)
        if path is None:
            continue
        for imported in sorted(_project_imports(root, module, path)):
            if imported not in chains:
                chains[imported] = [*chains[module], imported]
                todo.append(imported)
    return chains


def transitive_violations(root: Path, start: str) -> list[str]:
    found = []
    for module, chain in reachable(root, start).items():
        parts = module.split(".")
        if parts[0] == "coordinator" and len(parts) > 1 and parts[1] in OUTSIDE_THE_CORE:
            found.append(" -> ".join(chain))
        elif parts[:2] != ["coordinator", "core"] and (path := _module_path(root, module)) is not None:
            found += [f"{' -> '.join(chain)}: {v}" for v in _violations(path)]
    return found


CORE_MODULES = sorted(
    ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__") for p in SOURCES
)


@pytest.mark.parametrize("module", CORE_MODULES)
def test_core_module_reaches_nothing_impure(module: str) -> None:
    assert transitive_violations(ROOT, module) == []


def test_the_transitive_check_sees_an_import_made_through_other_modules(tmp_path: Path) -> None:
    core = tmp_path / "coordinator" / "core"
    (tmp_path / "coordinator" / "security").mkdir(parents=True)
    core.mkdir()
    for package in (tmp_path / "coordinator", core, tmp_path / "coordinator" / "security"):
        (package / "__init__.py").write_text("")
    (core / "a.py").write_text("from coordinator.core import b\n")
    (core / "b.py").write_text("from coordinator.settings import x\n")
    (tmp_path / "coordinator" / "settings.py").write_text("def f():\n    from .security import store\n")
    (tmp_path / "coordinator" / "security" / "store.py").write_text("import secrets\n")
    found = transitive_violations(tmp_path, "coordinator.core.a")
    assert found == [
        "coordinator.core.a -> coordinator.core.b -> coordinator.settings -> coordinator.security",
        "coordinator.core.a -> coordinator.core.b -> coordinator.settings -> coordinator.security.store",
    ]
    (tmp_path / "coordinator" / "settings.py").write_text("import time\n")
    assert transitive_violations(tmp_path, "coordinator.core.a") == [
        "coordinator.core.a -> coordinator.core.b -> coordinator.settings: settings.py:1 import time"
    ]
