"""Closed by default: a node refuses to start with an API that says nothing about who may call it,
or an API of the group coordinator that says nothing about where its groups are. Each refusal goes
through the real start-up (`coordinator serve`, the node's assembly of its declared APIs) with one
factory changed to leave the rule out, and is one line and exit code 2, never a traceback."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from coordinator.api.authorization import Rule
from coordinator.api.declaration import DeclarationError
from coordinator.api.registry import ApiRegistry
from coordinator.node.apis import assemble
from coordinator.runtime.apis import classic_groups
from tests.support.server import free_port

LEAVE_OUT = textwrap.dedent("""
    import dataclasses, sys
    from coordinator.runtime.apis import classic_groups
    from coordinator.cli import main

    declared = classic_groups.heartbeat
    classic_groups.heartbeat = lambda shard: dataclasses.replace(declared(shard), {field}=None)
    sys.exit(main(sys.argv[1:]))
""")


def serve_with_heartbeat_lacking(field: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """`coordinator serve` in a process whose Heartbeat declaration has no `field`."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("COORDINATOR_")}
    args = ["serve", "--listen", f"127.0.0.1:{free_port()}", "--metrics-listen", f"127.0.0.1:{free_port()}",
            "--data-dir", str(tmp_path / "data")]
    return subprocess.run([sys.executable, "-c", LEAVE_OUT.format(field=field), *args], capture_output=True,
                          text=True, timeout=60, env=environ)


def assert_one_line_exit_2(result: subprocess.CompletedProcess[str], *expected: str) -> None:
    assert "Traceback" not in result.stderr + result.stdout
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for text in expected:
        assert text in lines[0], lines[0]


def test_an_api_without_an_authorization_rule_stops_start_up(tmp_path: Path) -> None:
    result = serve_with_heartbeat_lacking("authorization", tmp_path)
    assert_one_line_exit_2(result, "cannot start", "Heartbeat", "no authorization rule")
    assert not (tmp_path / "data" / "log").exists()  # refused before anything was opened


def test_a_group_api_without_a_placement_stops_start_up(tmp_path: Path) -> None:
    result = serve_with_heartbeat_lacking("placement", tmp_path)
    assert_one_line_exit_2(result, "cannot start", "Heartbeat", "no placement")


def test_a_rule_security_cannot_interpret_is_refused_too() -> None:
    class Whatever(Rule):
        pass

    declaration = classic_groups.heartbeat(lambda: None)
    try:
        assemble([dataclasses.replace(declaration, authorization=Whatever())], None)
    except DeclarationError as exc:
        assert "Whatever" in str(exc) and "\n" not in str(exc)
    else:
        raise AssertionError("an uninterpretable rule was accepted")


def test_every_api_a_node_declares_passes_and_is_bound() -> None:
    """The positive side: the real declarations assemble, and the group APIs come out bound."""
    declaration = classic_groups.heartbeat(lambda: None)
    (bound,) = assemble([declaration], None)
    assert bound.handle is not declaration.handle and bound.refuse is not None


def test_a_group_api_registered_without_the_assembly_is_refused() -> None:
    """A registry built from unbound declarations would serve them with no checks: it is refused."""
    try:
        ApiRegistry([classic_groups.heartbeat(lambda: None)])
    except DeclarationError as exc:
        assert "bound" in str(exc)
    else:
        raise AssertionError("an unbound group API was registered")
