"""``coordinator.core`` must stay pure: no I/O, clocks, randomness, id generation or runtime libraries.

Decision on ``uuid``: the core may name the ``uuid.UUID`` *type* (topic ids of KIP-848 records) but only
as ``from uuid import UUID``; ``import uuid`` (and with it ``uuid4``) is forbidden, so the core cannot
generate ids. Ids come in on requests (e.g. ``JoinGroup.new_member_id``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[2] / "coordinator" / "core"

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
    tree = ast.parse(path.read_text(), filename=str(path))
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
