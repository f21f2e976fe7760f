"""`protocol.errors.ErrorCode` is the one table of Kafka's error codes: the same numbers and names as
kio's (generated from Kafka's message definitions), importable by the pure core."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from kio.schema.errors import ErrorCode as KioErrorCode

import protocol.errors
from coordinator.core.errors import ErrorCode as CoreErrorCode
from protocol.errors import ErrorCode

COORDINATOR = Path(__file__).resolve().parents[2] / "coordinator"


def test_every_kafka_error_code_has_kios_number_and_name() -> None:
    ours = {code.value: code.name for code in ErrorCode}
    theirs = {code.value: code.name.upper() for code in KioErrorCode}
    assert ours == theirs


def test_the_core_names_the_same_enum() -> None:
    assert CoreErrorCode is ErrorCode


def test_the_error_module_imports_only_the_standard_library() -> None:
    tree = ast.parse(Path(protocol.errors.__file__).read_text())
    roots = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    roots |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert roots - {"__future__"} <= sys.stdlib_module_names


def test_the_core_imports_nothing_of_the_protocol_package_but_its_error_table() -> None:
    found = []
    for path in (COORDINATOR / "core").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "protocol":
                found.append(node.module)
            if isinstance(node, ast.Import):
                found += [a.name for a in node.names if a.name.split(".")[0] == "protocol"]
    assert set(found) <= {"protocol.errors"}


def test_no_module_declares_a_kafka_error_code_as_a_bare_int() -> None:
    """`NAME = 42` where NAME is one of Kafka's error names: name it as ErrorCode.NAME instead."""
    names = set(ErrorCode.__members__)
    offenders = []
    for path in [*COORDINATOR.rglob("*.py"), *(COORDINATOR.parent / "protocol").rglob("*.py")]:
        for node in ast.parse(path.read_text()).body:
            if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
                    and isinstance(node.value.value, int)
                    and any(isinstance(t, ast.Name) and t.id in names for t in node.targets)):
                offenders.append(f"{path.relative_to(COORDINATOR.parent)}:{node.lineno}")
    assert offenders == []
