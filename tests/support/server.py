"""Start the real server for a test: in this process (async tests) or as a child process
(real client libraries, signals, crashes). Free ports on 127.0.0.1, a temporary data directory,
readiness polled from /readyz with a deadline."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_port_block(count: int, attempts: int = 200) -> int:
    """A port `p` with `p .. p + count - 1` all free now (shard k listens on port + k). Chosen
    below the kernel's ephemeral range: the ports it hands to outgoing connections and to
    `bind(0)` (other tests' free ports) are taken from that range at any moment, and shard k
    binds port + k only seconds later. Every shard test picks its ports here."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    rng = random.Random()
    for _ in range(attempts):
        base = rng.randrange(max(1024, low - 12000), low - count)
        with contextlib.ExitStack() as held:
            try:
                for port in range(base, base + count):
                    s = held.enter_context(socket.socket())
                    s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return base
    raise RuntimeError(f"no block of {count} free ports")


def wait_until(predicate, timeout: float = 10.0, interval: float = 0.02, message: str = "condition"):
    """Poll `predicate` until it returns a truthy value or the deadline passes."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        time.sleep(interval)


def http_get(port: int, path: str, timeout: float = 2.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


class ServerProcess:
    """`python -m coordinator serve` as a child process."""

    def __init__(self, data_dir: Path, overrides: dict[str, str] | None = None, port: int | None = None,
                 metrics_port: int | None = None, scheme: str = "", extra_args: tuple[str, ...] = ()) -> None:
        """`scheme` names the listener (`SASL_SSL`): `--listen SCHEME://127.0.0.1:port`; `extra_args`
        go after the others (`--shard K`)."""
        self.data_dir = data_dir
        self.extra_args = extra_args
        self.port = port or free_port()
        self.scheme = scheme
        self.metrics_port = metrics_port or free_port()
        self.overrides = {"group.initial.rebalance.delay.ms": "0", **(overrides or {})}
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = data_dir.parent / f"server-{self.port}.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, wait: bool = True) -> ServerProcess:
        listen = f"{self.scheme}://127.0.0.1:{self.port}" if self.scheme else f"127.0.0.1:{self.port}"
        args = [sys.executable, "-m", "coordinator", "serve", "--listen", listen,
                "--metrics-listen", f"127.0.0.1:{self.metrics_port}", "--data-dir", str(self.data_dir),
                "--log-format", "json"]
        for key, value in self.overrides.items():
            args += ["--override", f"{key}={value}"]
        args += self.extra_args
        env = {k: v for k, v in os.environ.items() if not k.startswith("COORDINATOR_")}
        if hasattr(self, "_log"):
            self._log.close()  # restarted: the previous process's log handle
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(args, stdout=self._log, stderr=subprocess.STDOUT, env=env)
        if wait:
            self.wait_ready()
        return self

    def ready(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"server exited with {self.proc.returncode}:\n{self.log()}")
        try:
            status, _ = http_get(self.metrics_port, "/readyz", timeout=0.5)
        except OSError:
            return False
        return status == 200

    def wait_ready(self, timeout: float = 20.0) -> None:
        wait_until(self.ready, timeout, message="server readiness")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def terminate(self, timeout: float = 15.0) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.terminate()
            self.kill()
        if hasattr(self, "_log"):
            self._log.close()


@contextlib.contextmanager
def running_server(tmp_path: Path, **kwargs) -> Iterator[ServerProcess]:
    server = ServerProcess(tmp_path / "data", **kwargs)
    try:
        yield server.start()
    finally:
        server.stop()
