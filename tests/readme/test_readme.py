"""README.md is tested: every command block runs, in order, against what the two set-up commands
made (tests/readme/walk.py does the walking, in a network namespace of its own so README's fixed
ports are free), one test per block. A block that fails fails its test with the block and its
output; a block that needs what the machine lacks skips with the reason; the Spark pipeline's blocks
are slow (`pytest -m slow tests/readme`). A last test checks that the files the blocks wrote are all
ignored by .gitignore, so following README leaves a checkout clean."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
from typing import Any

import pytest

from tests.readme.blocks import ROOT, Block, readme_blocks
from tests.readme.walk import is_spark

BLOCKS = readme_blocks()
WALK_TIMEOUT = 1200.0

pytestmark = pytest.mark.timeout(WALK_TIMEOUT + 60)  # the first test of the module waits for the walk


def namespace_argv() -> list[str] | None:
    """`unshare --net` (with a user namespace when not root), if this machine allows it."""
    if shutil.which("unshare") is None:
        return None
    argv = ["unshare", "--net"] if os.geteuid() == 0 else ["unshare", "--map-root-user", "--net"]
    probe = subprocess.run([*argv, "true"], capture_output=True)
    return argv if probe.returncode == 0 else None


def run_walk(results_file: Any, slow: bool, readme: Any = None) -> tuple[dict[int, dict[str, Any]], str]:
    """Run the walk in its own network namespace; its results by block index, and its log."""
    argv = namespace_argv()
    if argv is None:
        pytest.skip("running README's blocks on README's own ports needs a network namespace (unshare --net)")
    command = [*argv, sys.executable, "-m", "tests.readme.walk", str(results_file)]
    command += ["--slow"] if slow else []
    command += ["--readme", str(readme)] if readme else []
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        log, _ = proc.communicate(timeout=WALK_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)  # the walk stops its servers on SIGTERM
        log, _ = proc.communicate(timeout=60)
        pytest.fail(f"README's walk did not finish in {WALK_TIMEOUT:.0f} s:\n{log[-4000:]}")
    if proc.returncode != 0 or not results_file.exists():
        pytest.fail(f"README's walk crashed (exit {proc.returncode}):\n{log[-4000:]}")
    results = {}
    for line in results_file.read_text().splitlines():
        result = json.loads(line)
        results[result.pop("index")] = result
    return results, log


def set_up_done() -> bool:
    """`./dev test` installed the test extra for this pyproject.toml (./dev's stamp): README's
    commands then run without installing anything (the walk's namespace has no network)."""
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()[:16]
    return (ROOT / ".venv" / f".installed-test-{digest}").exists()


@pytest.fixture(scope="module")
def walk(request, tmp_path_factory) -> dict[int, dict[str, Any]]:
    """One walk for the module; with the Spark blocks if any of their tests was selected."""
    if not set_up_done():
        pytest.fail("README's set-up has not run for this pyproject.toml: run ./dev test", pytrace=False)
    slow = any(item.module is sys.modules[__name__] and item.get_closest_marker("slow")
               for item in request.session.items)
    results, _ = run_walk(tmp_path_factory.mktemp("readme") / "results.jsonl", slow)
    return results


def report(result: dict[str, Any]) -> None:
    if result["outcome"] == "skipped":
        pytest.skip(result["reason"])
    if result["outcome"] == "failed":
        pytest.fail(result["output"], pytrace=False)
    assert result["outcome"] == "passed", result


def test_readme_spells_every_command_through_dev() -> None:
    """After the set-up nothing is on PATH but what the machine had: README's commands go through
    ./dev (or name the .venv's programs by path)."""
    bare = [f"README.md:{b.line}: {c}" for b in BLOCKS for c in b.commands
            if c.split()[0] in ("coordinator", "python", "python3", "pip", "spark-submit", "pytest")]
    assert not bare, "commands a fresh checkout cannot run:\n" + "\n".join(bare)


def test_readme_has_blocks_of_every_kind() -> None:
    kinds = {b.kind for b in BLOCKS}
    assert {"sh", "python", "file"} <= kinds, kinds


def block_param(block: Block) -> Any:
    return pytest.param(block, id=block.id, marks=[pytest.mark.slow] if is_spark(block.text) else [])


@pytest.mark.parametrize("block", [block_param(b) for b in BLOCKS if b.runs])
def test_block(block: Block, walk: dict[int, dict[str, Any]]) -> None:
    report(walk[block.index])


def test_readme_commands_leave_the_checkout_clean(walk: dict[int, dict[str, Any]]) -> None:
    report(walk[-1])
