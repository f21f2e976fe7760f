"""`coordinator scram add`: the first user, written into a stopped coordinator's log."""

from __future__ import annotations

import subprocess
import sys

import pytest

from coordinator.security.cli import SpecError, parse_spec
from tests.support.server import ServerProcess


def scram_add(data_dir, *specs: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "coordinator", "scram", "add", "--data-dir", str(data_dir), *specs],
                          capture_output=True, text=True, timeout=60)


def test_kafkas_add_scram_syntax_is_understood() -> None:
    user, mechanism, password, iterations = parse_spec("SCRAM-SHA-256=[name=alice,password=a=b,iterations=8192]")
    assert (user, mechanism.name, password, iterations) == ("alice", "SCRAM-SHA-256", "a=b", 8192)
    for bad in ("alice", "SCRAM-SHA-1=[name=a,password=b]", "SCRAM-SHA-256=[name=a]",
                "SCRAM-SHA-256=[name=a,password=b,iterations=100]", "SCRAM-SHA-256=[name=a,password=b,salt=x]"):
        with pytest.raises(SpecError):
            parse_spec(bad)


def test_a_bad_spec_is_one_line_and_exit_2(tmp_path) -> None:
    result = scram_add(tmp_path / "data", "SCRAM-SHA-1=[name=a,password=b]")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "SCRAM-SHA-1" in result.stderr


def test_it_refuses_a_data_directory_a_server_holds(tmp_path) -> None:
    server = ServerProcess(tmp_path / "data").start()
    try:
        result = scram_add(tmp_path / "data", "SCRAM-SHA-512=[name=a,password=b]")
        assert result.returncode == 1 and "in use" in result.stderr and "Traceback" not in result.stderr
    finally:
        server.stop()


def test_the_log_holds_no_password(tmp_path) -> None:
    assert scram_add(tmp_path / "data", "SCRAM-SHA-512=[name=alice,password=very-secret-pw]").returncode == 0
    dumped = subprocess.run([sys.executable, "-m", "coordinator", "log", "dump", "--data-dir", str(tmp_path / "data")],
                            capture_output=True, text=True, timeout=60)
    assert '"type": "ScramCredential"' in dumped.stdout and '"user": "alice"' in dumped.stdout
    assert "very-secret-pw" not in dumped.stdout
    assert b"very-secret-pw" not in b"".join(p.read_bytes() for p in (tmp_path / "data" / "log").iterdir())
