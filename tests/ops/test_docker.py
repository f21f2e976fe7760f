"""The Dockerfile without a Docker engine: its instructions parse, what it copies exists and is not
excluded by .dockerignore, the image runs as a non-root user with /data as a volume, the lock pins
exactly the tested runtime dependencies, and its entrypoint, run outside Docker with exactly the
environment the Dockerfile sets (ports and directories remapped), becomes ready, passes the image's
HEALTHCHECK command and stops cleanly on the image's STOPSIGNAL."""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shlex
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from dockerfile_parse import DockerfileParser
from packaging.utils import canonicalize_name

from tests.ops.lockfile import ROOT, installed_closure, render, runtime_requirements
from tests.support.server import free_port, http_get, wait_until

DOCKERFILE = ROOT / "Dockerfile"


@dataclass
class Stage:
    name: str | None
    base: str
    instructions: list[tuple[str, str]] = field(default_factory=list)


def global_args() -> dict[str, str]:
    """The ARGs declared before the first FROM, with their defaults (what FROM lines may use)."""
    args: dict[str, str] = {}
    for item in DockerfileParser(str(DOCKERFILE)).structure:
        if item["instruction"] == "FROM":
            break
        if item["instruction"] == "ARG":
            name, _, default = item["value"].partition("=")
            args[name.strip()] = default.strip()
    return args


def stages() -> list[Stage]:
    """The build stages, FROM resolved with the global ARGs' defaults (as a plain `docker build`)."""
    defaults = global_args()
    result: list[Stage] = []
    for item in DockerfileParser(str(DOCKERFILE)).structure:
        instruction, value = item["instruction"], item["value"]
        if instruction == "COMMENT" or (instruction == "ARG" and not result):
            continue
        if instruction == "FROM":
            value = re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: defaults[m[1] or m[2]], value)
            parts = value.split()
            result.append(Stage(parts[2] if len(parts) == 3 and parts[1].upper() == "AS" else None, parts[0]))
        else:
            assert result, f"{instruction} before FROM"
            result[-1].instructions.append((instruction, value))
    return result


def final_chain() -> list[Stage]:
    """The final stage and the stages it is built FROM, base first."""
    by_name = {s.name: s for s in stages() if s.name}
    chain = [stages()[-1]]
    while chain[0].base in by_name:
        chain.insert(0, by_name[chain[0].base])
    return chain


def last(instruction: str) -> str:
    values = [v for s in final_chain() for i, v in s.instructions if i == instruction]
    assert values, f"no {instruction} in the final image"
    return values[-1]


def image_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for stage in final_chain():
        for instruction, value in stage.instructions:
            if instruction == "ENV":
                for pair in shlex.split(value):
                    key, _, val = pair.partition("=")
                    env[key] = val.replace("$PATH", env.get("PATH", ""))
    return env


def exec_form(value: str) -> list[str]:
    parsed = json.loads(value)
    assert isinstance(parsed, list) and all(isinstance(p, str) for p in parsed), f"not exec form: {value}"
    return parsed


def healthcheck_command() -> list[str]:
    value = last("HEALTHCHECK")
    assert " CMD " in f" {value} ", value
    return exec_form(value.split("CMD", 1)[1].strip())


def test_the_image_builds_from_a_slim_python_311_base_in_stages() -> None:
    assert stages()[0].base == "python:3.11-slim"
    assert final_chain()[0].base == "python:3.11-slim"
    assert len(stages()) >= 2, "dependencies are built in a separate stage"


def test_the_base_image_is_a_build_argument_and_nothing_else_needs_docker_hub() -> None:
    # Where Docker Hub is out of reach, --build-arg PYTHON_IMAGE=<a local image> replaces the base
    # (tests/ops/test_docker_engine.py builds one from Debian's packages).
    assert global_args() == {"PYTHON_IMAGE": "python:3.11-slim"}
    first_from = next(i["value"] for i in DockerfileParser(str(DOCKERFILE)).structure
                      if i["instruction"] == "FROM")
    assert first_from.split()[0] == "${PYTHON_IMAGE}"
    # A `# syntax=` directive would make BuildKit pull its frontend image from Docker Hub.
    assert not DOCKERFILE.read_text().startswith("# syntax=")
    assert {s.base for s in stages()} - {s.name for s in stages()} == {"python:3.11-slim"}


def test_every_copy_source_exists_and_is_not_dockerignored() -> None:
    patterns = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]

    def ignored(path: str) -> bool:
        verdict = False  # Docker's rule: the last matching pattern wins, "!" re-includes.
        for pattern in patterns:
            negated = pattern.startswith("!")
            body = pattern[1:] if negated else pattern
            body = body.rstrip("/")
            if fnmatch.fnmatch(path, body) or path.startswith(body + "/"):
                verdict = not negated
        return verdict

    copies = 0
    for stage in stages():
        for instruction, value in stage.instructions:
            if instruction not in ("COPY", "ADD"):
                continue
            args = [a for a in shlex.split(value) if not a.startswith("--")]
            if any(a.startswith("--from=") for a in shlex.split(value)):
                continue
            for source in args[:-1]:
                copies += 1
                assert (ROOT / source).exists(), f"COPY source {source} does not exist"
                assert not ignored(source), f"COPY source {source} is excluded by .dockerignore"
    assert copies >= 4


def test_the_image_runs_as_a_non_root_user_with_a_data_volume_and_a_graceful_stop() -> None:
    user = last("USER").split(":")[0]
    assert user not in ("root", "0")
    assert "/data" in exec_form(last("VOLUME"))
    assert last("STOPSIGNAL") == "SIGTERM"
    assert exec_form(last("ENTRYPOINT")) == ["coordinator", "serve"]
    assert image_env()["COORDINATOR_LOG_DIRS"] == "/data"
    assert image_env()["COORDINATOR_LISTENERS"] == "PLAINTEXT://0.0.0.0:9092"
    assert image_env()["COORDINATOR_METRICS_LISTEN"] == "0.0.0.0:9644"
    assert image_env()["COORDINATOR_ADVERTISED_LISTENERS"]
    assert set(last("EXPOSE").split()) == {"9092", "9644"}
    assert healthcheck_command()[0] == "python"


def test_the_lock_pins_the_runtime_dependency_closure_within_pyproject_ranges() -> None:
    lock = (ROOT / "requirements.lock").read_text()
    assert lock.startswith(render().split("\n", 1)[0]), "requirements.lock lost its header"
    pins = dict(line.split("==") for line in lock.splitlines() if line and not line.startswith("#"))
    assert all(re.fullmatch(r"[a-z0-9-]+", name) for name in pins), "names are canonical"
    # Exactly the runtime closure: no test tools, nothing missing (versions may differ from a newer
    # virtualenv; the lock is what the image installs).
    assert set(pins) == set(installed_closure())
    assert "pytest" not in pins and "confluent-kafka" not in pins
    for requirement in runtime_requirements():
        pinned = pins[canonicalize_name(requirement.name)]
        assert requirement.specifier.contains(pinned), f"{requirement.name}=={pinned} is outside {requirement}"


@pytest.fixture
def entrypoint_process(tmp_path: Path):
    """The image's entrypoint as a child process with the image's environment, remapped."""
    port, metrics_port = free_port(), free_port()
    env = image_env()
    remapped = {
        "COORDINATOR_LISTENERS": f"PLAINTEXT://127.0.0.1:{port}",
        "COORDINATOR_ADVERTISED_LISTENERS": f"PLAINTEXT://127.0.0.1:{port}",
        "COORDINATOR_METRICS_LISTEN": f"127.0.0.1:{metrics_port}",
        "COORDINATOR_LOG_DIRS": str(tmp_path / "data"),
        # The image's PATH names /opt/venv; here the tested interpreter stands in for it.
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    assert set(remapped) <= set(env), "the test remaps a variable the Dockerfile no longer sets"
    env.update(remapped)
    command = exec_form(last("ENTRYPOINT"))
    assert command[0] == "coordinator"
    log = open(tmp_path / "entrypoint.log", "wb")  # noqa: SIM115 - closed below
    process = subprocess.Popen([sys.executable, "-m", "coordinator", *command[1:]], env=env,
                               stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path)
    try:
        yield process, env, metrics_port
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
        log.close()


def test_the_entrypoint_runs_with_the_image_environment_passes_the_healthcheck_and_stops_on_sigterm(
        entrypoint_process, tmp_path: Path) -> None:
    process, env, metrics_port = entrypoint_process
    healthcheck = [sys.executable, *healthcheck_command()[1:]]

    def ready() -> bool:
        assert process.poll() is None, (tmp_path / "entrypoint.log").read_text(errors="replace")
        try:
            return http_get(metrics_port, "/readyz", timeout=0.5)[0] == 200
        except OSError:
            return False

    wait_until(ready, timeout=20, message="entrypoint readiness")
    assert Path(env["COORDINATOR_LOG_DIRS"]).is_dir(), "the data directory comes from COORDINATOR_LOG_DIRS"
    assert subprocess.run(healthcheck, env=env, timeout=10, capture_output=True).returncode == 0

    process.send_signal(getattr(signal, last("STOPSIGNAL")))
    assert process.wait(15) == 0, (tmp_path / "entrypoint.log").read_text(errors="replace")
    failed = subprocess.run(healthcheck, env=env, timeout=10, capture_output=True)
    assert failed.returncode != 0, "the healthcheck must fail once the server is gone"
