"""The one handler style of `coordinator/runtime/apis`: factories named after their API, given only
what they need (never the server), error codes from the one table."""

from __future__ import annotations

import ast
from pathlib import Path

from kio.schema.index import api_key_map

from protocol.private import SNAKE_NAMES as PRIVATE_APIS

APIS = Path(__file__).resolve().parents[2] / "coordinator" / "runtime" / "apis"
MODULES = sorted(APIS.glob("*.py"))
BUILDERS = {"group_api", "bind"}  # declare a group API from its to_core/to_wire/on_error; bind it to its checks


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def test_no_api_module_imports_the_server() -> None:
    found = []
    for path in MODULES:
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[-1] == "server":
                found.append(f"{path.name}:{node.lineno}")
    assert found == []


def test_every_handler_factory_is_named_after_its_api() -> None:
    api_names = set(api_key_map.values()) | set(PRIVATE_APIS.values()) | BUILDERS
    factories = []
    for path in MODULES:
        for node in _tree(path).body:
            if isinstance(node, ast.FunctionDef) and isinstance(node.returns, ast.Name) and node.returns.id in ("ApiHandler", "ApiDeclaration"):
                factories.append((path.name, node.name))
    assert len(factories) >= 17
    assert [f for f in factories if f[1] not in api_names] == []


def test_no_factory_takes_a_server() -> None:
    offenders = []
    for path in MODULES:
        for node in _tree(path).body:
            if isinstance(node, ast.FunctionDef):
                offenders += [f"{path.name}:{node.name}" for a in node.args.args if a.arg == "server"]
    assert offenders == []
