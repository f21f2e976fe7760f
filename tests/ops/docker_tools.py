"""What the Docker tests need from the machine: the Compose implementations installed (Compose v2,
as the `docker compose` plugin or a standalone v2 `docker-compose`, and docker-compose 1.x, which is
Debian 12's), and a running Docker engine, started here (and stopped again) when none runs but
`dockerd` is installed and we are root."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path


@dataclass(frozen=True)
class Compose:
    """One Compose implementation: `command` stands where `docker compose` would."""

    generation: str  # "v2" or "v1"
    command: tuple[str, ...]
    version: str

    def run(self, *args: str, env: dict[str, str] | None = None, timeout: float = 120,
            cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self.command, *args], env=env, cwd=cwd, timeout=timeout,
                              capture_output=True, text=True, check=False)


def _version(command: list[str]) -> str | None:
    try:
        done = subprocess.run([*command, "version", "--short"], capture_output=True, text=True,
                              timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip().removeprefix("v") if done.returncode == 0 else None


@cache
def compose_implementations() -> tuple[Compose, ...]:
    """Every Compose generation found, v2 first; at most one of each."""
    found: dict[str, Compose] = {}
    candidates = []
    if shutil.which("docker"):
        candidates.append(["docker", "compose"])
    if shutil.which("docker-compose"):
        candidates.append(["docker-compose"])
    for command in candidates:
        version = _version(command)
        if version is None:
            continue
        generation = "v1" if version.startswith("1.") else "v2"
        found.setdefault(generation, Compose(generation, tuple(command), version))
    return tuple(found[g] for g in ("v2", "v1") if g in found)


def engine_answers() -> bool:
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=20,
                              check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


class EngineUnavailable(Exception):
    """Why no Docker engine can be had here (the test's skip reason)."""


@contextmanager
def docker_engine(log_dir: Path, start_timeout: float = 60.0) -> Iterator[None]:
    """A Docker engine that answers `docker info` while inside. One already running is used and
    left running; otherwise `dockerd` is started with its defaults (overlay2, bridge networking
    with iptables work in this project's VM) and stopped on the way out."""
    if shutil.which("docker") is None:
        raise EngineUnavailable("no docker CLI (apt-get install docker.io)")
    if engine_answers():
        yield
        return
    if shutil.which("dockerd") is None:
        raise EngineUnavailable("no Docker engine runs and dockerd is not installed (apt-get install docker.io)")
    if os.geteuid() != 0:
        raise EngineUnavailable("no Docker engine runs and starting dockerd needs root")
    log_path = log_dir / "dockerd.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(["dockerd"], stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    try:
        deadline = time.monotonic() + start_timeout
        while not engine_answers():
            if process.poll() is not None or time.monotonic() > deadline:
                tail = log_path.read_text(errors="replace").splitlines()[-5:]
                raise EngineUnavailable(f"dockerd did not start: {' | '.join(tail)}")
            time.sleep(0.5)
        yield
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)  # dockerd stops its containers and its containerd
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
