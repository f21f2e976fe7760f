"""Fixtures of the operations tests: one real server process per module (free ports, temporary
data directory) and a runner for `coordinator` sub-commands that captures their output."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from coordinator.cli import main
from tests.support.server import ServerProcess

TOPICS = "listed:1,described:3,reset:3,deleted:2,fallback:1"
"""Topics declared at start-up, one per test so tests never see each other's groups' offsets."""


@dataclass
class Run:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        assert self.code == 0, f"exit {self.code}: {self.err}"
        return json.loads(self.out)


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[ServerProcess]:
    process = ServerProcess(tmp_path_factory.mktemp("ops") / "data", overrides={"topics": TOPICS})
    process.start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
def cli(server: ServerProcess, capsys):
    """`cli("groups", "list", "--json")` runs the CLI in-process against the module's server."""

    def run(*args: str, bootstrap: str | None = None) -> Run:
        capsys.readouterr()
        code = main([*args, "--bootstrap", bootstrap or server.bootstrap])
        captured = capsys.readouterr()
        return Run(code, captured.out, captured.err)

    return run
