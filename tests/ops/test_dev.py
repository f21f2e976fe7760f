"""`./dev`, the entry point README documents: after the set-up (`./dev test`) it runs any
`coordinator` command and the examples' Python without installing anything again (the test
extra includes the base, the examples' and the pipeline's dependencies), and anything else is a
usage line and exit 2."""

from __future__ import annotations

import os
import subprocess

from tests.ops.lockfile import ROOT


def dev(*args: str) -> subprocess.CompletedProcess[str]:
    venv = str(ROOT / ".venv")
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if not p.startswith(venv))
    env["PIP_NO_INDEX"] = "1"  # an install attempt fails at once instead of reaching the index
    return subprocess.run([str(ROOT / "dev"), *args], cwd="/", env=env, capture_output=True, text=True, timeout=120)


def stamps() -> set[str]:
    return {p.name for p in (ROOT / ".venv").glob(".installed-*")}


def test_dev_runs_any_coordinator_command_without_reinstalling() -> None:
    before = stamps()
    result = dev("coordinator", "log", "--help")
    assert result.returncode == 0, result.stderr
    assert "dump" in result.stdout and "verify" in result.stdout
    assert stamps() == before, "the test extra's install covers the base one"


def test_dev_python_has_the_project_and_the_examples_client() -> None:
    before = stamps()
    result = dev("python", "-c", "import coordinator, confluent_kafka; print('ok')")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
    assert stamps() == before


def test_an_unknown_dev_command_is_usage_and_exit_2() -> None:
    result = dev("nonsense")
    assert result.returncode == 2
    assert result.stderr.startswith("usage: ./dev serve")
