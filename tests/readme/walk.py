"""Run README.md's blocks in order, as a reader would after the two set-up commands, and write one
result per block (JSON lines) to the file given.

`python -m tests.readme.walk RESULTS [--slow]` must run in a network namespace of its own (the test
starts it under `unshare --net`): README's commands use its fixed ports (9092, 9093, 9644) as
written, and a namespace makes them free and private to this walk whatever else runs on the machine.

The walk happens in a scratch directory holding a symbolic link to every top-level entry of the
checkout (so `./dev`, `.venv`, `examples/` are the checkout's, made by its set-up) and nothing
else: what the blocks write (`data/`, `tls/`, exports, reports) lands there. At the end every file
they wrote must be one the checkout's .gitignore ignores, so following README in the checkout
leaves it clean; that is reported as a last pseudo-block, `checkout-stays-clean`.

A section (any heading) is a scene: the servers and background commands its blocks start are
stopped when the next heading begins, with the signal README names (SIGTERM for a server, Ctrl-C
for a consumer), and must exit 0.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import itertools
import json
import os
import re
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.readme.blocks import README, ROOT, Block, readme_blocks

COMMAND_TIMEOUT = 600.0  # the foreground commands of one block; the Spark block (two reports) is the longest
READY_TIMEOUT = 90.0
STOP_TIMEOUT = 30.0
DEFAULT_METRICS_PORT = 9644
DEFAULT_SERVER = "./dev serve"
OUTPUT_TAIL = 6000


class BlockFailed(Exception):
    pass


class BlockSkipped(Exception):
    pass


class MissingTool(BlockSkipped):
    """The machine lacks what the block needs; the blocks after it in its section are skipped too."""


def bring_loopback_up() -> None:
    """A new network namespace starts with `lo` down (what `ip link set lo up` does)."""
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        request = struct.pack("16sH", b"lo", 0)
        flags = struct.unpack("16sH", fcntl.ioctl(s, siocgifflags, request)[:18])[1]
        fcntl.ioctl(s, siocsifflags, struct.pack("16sH", b"lo", flags | iff_up))


def is_server(command: str) -> bool:
    words = command.split()
    return words[:2] == ["./dev", "serve"] or words[:3] == ["./dev", "coordinator", "serve"] \
        or words[:2] == ["coordinator", "serve"]


def is_spark(text: str) -> bool:
    """The Spark pipeline's commands: they need Java and take a minute of CPU each."""
    return bool(re.search(r"-m pipeline\.|spark-submit|-m bench\.pipeline", text))


def has_java() -> bool:
    return shutil.which("java") is not None or bool(os.environ.get("JAVA_HOME"))


def dockerfile_bases() -> list[str]:
    bases = []
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        words = line.split()
        if words[:1] == ["FROM"] and len(words) > 1:
            bases.append(words[1])
    return bases


SHELL_WORDS = frozenset({"cd", "export", "set", "unset", "source", ".", "echo", "printf", "test", "[",
                         "true", "false", "exec", "eval", "wait", "kill", "trap", "read", "exit"})


def programs_of(command: str) -> set[str]:
    """The programs a command line runs: the first word of each part between && || | ; (comments
    dropped), after any VAR=value prefixes."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    programs, first = set(), True
    for token in lexer:
        if token in ("&&", "||", "|", ";", "&", "(", ")"):
            first = True
        elif first and not re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", token):
            programs.add(token)
            first = False
    return programs


def missing_tool(block: Block) -> str | None:
    """Why the machine cannot run this block, or None."""
    programs = set().union(*(programs_of(c) for c in block.commands))
    for program in sorted(programs):
        if "/" not in program and program not in SHELL_WORDS and shutil.which(program) is None:
            return f"needs {program}, which this machine does not have"
    if any(p.startswith("docker") for p in programs):
        if subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
            return "needs a running container engine (`docker info` fails)"
        for base in dockerfile_bases():
            if subprocess.run(["docker", "image", "inspect", base], capture_output=True).returncode != 0:
                return f"needs the base image {base}, which this machine's docker does not have (no registry access)"
        if "docker compose" in block.text and subprocess.run(["docker", "compose", "version"],
                                                             capture_output=True).returncode != 0:
            return "needs Docker Compose v2 (`docker compose version` fails)"
    if is_spark(block.text) and not has_java():
        return "the Spark pipeline needs Java 17 (java on PATH or JAVA_HOME)"
    return None


@dataclass
class Background:
    block: Block
    command: str
    proc: subprocess.Popen[bytes]
    log: Path
    stop_signal: signal.Signals

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-OUTPUT_TAIL:]


class Walk:
    def __init__(self, work: Path, logs: Path, env: dict[str, str]) -> None:
        self.work, self.logs, self.env = work, logs, env
        self.running: list[Background] = []
        self.failures: dict[int, str] = {}  # block index -> what went wrong after its own run
        self.section_skipped: str | None = None

    # -- running commands -------------------------------------------------------------------

    def foreground(self, script: str, stdin: str | None = None, argv: list[str] | None = None) -> str:
        """Run commands to their end (bash -e: the first failing one fails the block). In a session
        of their own, so a timeout kills what they started too (Spark's JVM)."""
        proc = subprocess.Popen(argv or ["bash", "-e", "-o", "pipefail", "-c", script], cwd=self.work,
                                env=self.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        try:
            output, _ = proc.communicate(stdin, timeout=COMMAND_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
            raise BlockFailed(f"still running after {COMMAND_TIMEOUT:.0f} s:\n{script}\n--- output ---\n"
                              f"{output[-OUTPUT_TAIL:]}") from None
        if proc.returncode != 0:
            raise BlockFailed(f"exit {proc.returncode}:\n{script}\n--- output ---\n{output[-OUTPUT_TAIL:]}")
        return output

    def start(self, block: Block, command: str, stop_signal: signal.Signals) -> Background:
        log = self.logs / f"{block.index:02d}-{len(self.running)}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(["bash", "-c", command], cwd=self.work, env=self.env, stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        background = Background(block, command, proc, log, stop_signal)
        self.running.append(background)
        return background

    def wait_ready(self, background: Background, ready: Any, what: str) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        while not ready():
            if background.proc.poll() is not None:
                raise BlockFailed(f"exited {background.proc.returncode} before {what}:\n{background.command}\n"
                                  f"--- output ---\n{background.output()}")
            if time.monotonic() > deadline:
                raise BlockFailed(f"not {what} after {READY_TIMEOUT:.0f} s:\n{background.command}\n"
                                  f"--- output ---\n{background.output()}")
            time.sleep(0.1)

    def serve(self, block: Block, command: str) -> None:
        port = metrics_port(command, self.work)
        background = self.start(block, command, signal.SIGTERM)
        self.wait_ready(background, lambda: readyz(port), f"ready (/readyz on port {port})")

    def stop_section(self) -> None:
        """End of a section: stop what it started, newest first; each must exit 0."""
        while self.running:
            background = self.running.pop()
            proc = background.proc
            if proc.poll() is None:
                proc.send_signal(background.stop_signal)
                try:
                    proc.wait(STOP_TIMEOUT)
                except subprocess.TimeoutExpired:
                    self.failures.setdefault(background.block.index, (
                        f"did not stop within {STOP_TIMEOUT:.0f} s of {background.stop_signal.name}:\n"
                        f"{background.command}\n--- output ---\n{background.output()}"))
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # what it left behind, if anything
            proc.wait()
            if proc.returncode != 0 and background.block.index not in self.failures:
                self.failures[background.block.index] = (
                    f"exit {proc.returncode} after {background.stop_signal.name}:\n{background.command}\n"
                    f"--- output ---\n{background.output()}")

    # -- blocks -----------------------------------------------------------------------------

    def run(self, block: Block) -> None:
        if block.skip:
            raise BlockSkipped(block.skip)
        if block.commands and block.commands[0].startswith("./dev test"):
            raise BlockSkipped("the test suite itself: this test is part of it")
        if self.section_skipped:
            raise BlockSkipped(f"an earlier block of this section was skipped ({self.section_skipped})")
        if reason := missing_tool(block):
            raise MissingTool(reason)
        if block.needs_server and not self.running:
            self.serve(block, DEFAULT_SERVER)
        if block.kind == "file":
            assert block.file_name is not None
            (self.work / block.file_name).write_text(block.text)
        elif block.kind == "python":
            self.foreground("./dev python -", stdin=block.text, argv=["./dev", "python", "-"])
        elif block.until:
            pattern = re.compile(block.until)
            for command in block.commands:
                background = self.start(block, command, signal.SIGINT)
                self.wait_ready(background, lambda b=background: pattern.search(b.output()),
                                f"printing {block.until!r}")
        else:
            self.shell(block)

    def shell(self, block: Block) -> None:
        script: list[str] = []
        for command in block.commands:
            if is_server(command):
                if script:
                    self.foreground("\n".join(script))
                    script = []
                self.serve(block, command)
            else:
                script.append(command)
        if script:
            self.foreground("\n".join(script))


def metrics_port(command: str, work: Path) -> int:
    """Where a server command's /readyz is: --metrics-listen, else metrics.listen in its --config
    file, else the default."""
    words = shlex.split(command, comments=True)
    for flag, value in itertools.pairwise(words):
        if flag == "--metrics-listen":
            return int(value.rsplit(":", 1)[1])
        if flag == "--config":
            for line in (work / value).read_text().splitlines():
                key, _, setting = line.partition("=")
                if key.strip() == "metrics.listen":
                    return int(setting.rsplit(":", 1)[1])
    return DEFAULT_METRICS_PORT


def readyz(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as response:
            return bool(response.status == 200)
    except (OSError, urllib.error.URLError):
        return False


def scratch_checkout(work: Path) -> None:
    """Links to the checkout's top-level entries; never its .git or what the blocks will write."""
    for entry in ROOT.iterdir():
        if entry.name in (".git", "data") or (is_ignored(entry.name) and entry.name != ".venv"):
            continue
        (work / entry.name).symlink_to(entry)


def is_ignored(path: str) -> bool:
    return subprocess.run(["git", "-C", str(ROOT), "check-ignore", "--no-index", "-q", path],
                          capture_output=True).returncode == 0


def written_and_not_ignored(work: Path) -> list[str]:
    """What the blocks wrote in the scratch checkout that git would show as untracked there."""
    found: list[str] = []
    for entry in sorted(work.iterdir()):
        if entry.is_symlink():
            continue
        if entry.is_dir():
            if not is_ignored(entry.name + "/"):
                found.extend(str(p.relative_to(work)) for p in entry.rglob("*")
                             if p.is_file() and not is_ignored(str(p.relative_to(work))))
        elif not is_ignored(entry.name):
            found.append(entry.name)
    return found


def checkout_status() -> set[str]:
    """The checkout's own changes and untracked files (blocks reach it through the links)."""
    status = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=all"],
                            capture_output=True, text=True)
    return set(status.stdout.splitlines())


def walk_env() -> dict[str, str]:
    """The reader's environment: no virtualenv on PATH (README's commands must not need one), none
    of this test run's COORDINATOR_* settings."""
    venv = str(ROOT / ".venv")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("COORDINATOR_") and k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if not p.startswith(venv))
    env["PIP_NO_INDEX"] = "1"  # the namespace has no network: fail at once, never retry an index
    return env


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("results", type=Path)
    parser.add_argument("--slow", action="store_true", help="also the Spark pipeline's blocks")
    parser.add_argument("--readme", type=Path, default=README, help="another README (the walk's own tests)")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    bring_loopback_up()
    blocks = readme_blocks(args.readme)
    checkout_before = checkout_status()
    results: dict[int, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="readme-walk-") as tmp:
        work, logs = Path(tmp) / "checkout", Path(tmp) / "logs"
        work.mkdir()
        logs.mkdir()
        scratch_checkout(work)
        walk = Walk(work, logs, walk_env())
        section = None
        try:
            for block in blocks:
                if block.section != section:
                    walk.stop_section()
                    walk.section_skipped, section = None, block.section
                if not block.runs:
                    continue
                started = time.monotonic()
                if is_spark(block.text) and not args.slow:
                    results[block.index] = {"outcome": "deselected"}
                    continue
                try:
                    walk.run(block)
                    results[block.index] = {"outcome": "passed"}
                except MissingTool as exc:  # the section's next blocks build on this one
                    walk.section_skipped = walk.section_skipped or str(exc)
                    results[block.index] = {"outcome": "skipped", "reason": str(exc)}
                except BlockSkipped as exc:
                    results[block.index] = {"outcome": "skipped", "reason": str(exc)}
                except BlockFailed as exc:
                    results[block.index] = {"outcome": "failed", "output": str(exc)}
                results[block.index]["seconds"] = round(time.monotonic() - started, 1)
                print(f"block {block.id}: {results[block.index]['outcome']} "
                      f"({results[block.index]['seconds']} s)", file=sys.stderr, flush=True)
        finally:
            walk.stop_section()
        for index, failure in walk.failures.items():
            if results.get(index, {}).get("outcome") == "passed":
                results[index] = {"outcome": "failed", "output": failure}
        dirty = written_and_not_ignored(work)
        dirty += [f"{line} (in the checkout itself)" for line in sorted(checkout_status() - checkout_before)]
        results[-1] = ({"outcome": "passed"} if not dirty else
                       {"outcome": "failed", "output": "written and not ignored by .gitignore: " + ", ".join(dirty)})
    with args.results.open("w") as out:
        for index, result in sorted(results.items()):
            out.write(json.dumps({"index": index, **result}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
