"""The pinned runtime requirements of the image: the closure of pyproject's [project].dependencies
as installed in the tested virtualenv. `python -m tests.ops.lockfile > requirements.lock` rewrites
the lock; tests/ops/test_docker.py fails when the lock misses part of the closure, pins something
else, or pins a version outside pyproject's ranges."""

from __future__ import annotations

import sys
import tomllib
from importlib.metadata import distribution
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
HEADER = """\
# Pinned runtime dependencies of the coordinator image (the closure of pyproject's
# [project].dependencies, taken from the tested virtualenv); the image installs exactly these.
# tests/ops/test_docker.py checks it against pyproject. Regenerate with:
#   .venv/bin/python -m tests.ops.lockfile > requirements.lock
"""


def runtime_requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [Requirement(r) for r in project["dependencies"]]


def installed_closure() -> dict[str, str]:
    """Canonical name → installed version of every runtime dependency, transitively."""
    pins: dict[str, str] = {}
    stack = [r.name for r in runtime_requirements()]
    while stack:
        name = canonicalize_name(stack.pop())
        if name in pins:
            continue
        dist = distribution(name)
        pins[name] = dist.version
        for raw in dist.requires or []:
            requirement = Requirement(raw)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                stack.append(requirement.name)
    return dict(sorted(pins.items()))


def render() -> str:
    return HEADER + "".join(f"{name}=={version}\n" for name, version in installed_closure().items())


if __name__ == "__main__":
    sys.stdout.write(render())
