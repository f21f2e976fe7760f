"""Shard processes started by hand, as the supervisor will start them: the layout written with
`ensure_layout`, then `coordinator serve --shard K` for every K, node K on port P+K. Readiness is
polled from each shard's /readyz (its port from `<shard dir>/metrics.port`); processes are stopped
by pid. Also: group ids chosen to land on a given shard."""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from coordinator.shards.placement import ShardLayout, shard_data_dir
from coordinator.shards.reshard import ensure_layout
from tests.support.server import free_port_block, http_get, wait_until

PARTITIONS = 50


def group_on(shard: int, shards: int = 2, prefix: str = "group") -> str:
    """The first `prefix-N` group id that `shards` shards place on `shard`."""
    layout = ShardLayout(PARTITIONS, shards)
    return next(g for n in itertools.count() if layout.shard_of_group(g := f"{prefix}-{n}") == shard)


class ShardCluster:
    """`shards` shard processes over one data directory."""

    def __init__(self, data_dir: Path, shards: int = 2, overrides: dict[str, str] | None = None,
                 listen: str | None = None, port: int | None = None) -> None:
        """`listen` (several listeners) replaces `127.0.0.1:<port>`; `port` is then its first one."""
        self.root = data_dir
        self.shards = shards
        self.port = port or free_port_block(shards)
        self.listen = listen or f"127.0.0.1:{self.port}"
        self.overrides = {"group.initial.rebalance.delay.ms": "0", **(overrides or {})}
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self._logs: dict[int, object] = {}

    def bootstrap(self, shard: int = 0) -> str:
        return f"127.0.0.1:{self.port + shard}"

    def log_path(self, shard: int) -> Path:
        return self.root.parent / f"shard-{self.port}-{shard}.log"

    def log(self, shard: int) -> str:
        path = self.log_path(shard)
        return path.read_text(errors="replace") if path.exists() else ""

    def start(self) -> ShardCluster:
        ensure_layout(self.root, ShardLayout(PARTITIONS, self.shards))
        for k in range(self.shards):
            self.start_shard(k, wait=False)
        for k in range(self.shards):
            self.wait_ready(k)
        return self

    def start_shard(self, shard: int, wait: bool = True) -> None:
        metrics_file = shard_data_dir(self.root, shard) / "metrics.port"
        with contextlib.suppress(FileNotFoundError):
            metrics_file.unlink()  # a restarted shard writes its new port
        args = [sys.executable, "-m", "coordinator", "serve", "--data-dir", str(self.root),
                "--listen", self.listen, "--metrics-listen", "127.0.0.1:0",
                "--override", f"coordinator.shards={self.shards}", "--shard", str(shard), "--log-format", "json"]
        for key, value in self.overrides.items():
            args += ["--override", f"{key}={value}"]
        env = {k: v for k, v in os.environ.items() if not k.startswith("COORDINATOR_")}
        if shard in self._logs:
            self._logs[shard].close()  # type: ignore[attr-defined]  # restarted: the previous process's handle
        log = open(self.log_path(shard), "ab")  # noqa: SIM115 - closed in stop()
        self._logs[shard] = log
        self.procs[shard] = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env)
        if wait:
            self.wait_ready(shard)

    def ready(self, shard: int) -> bool:
        proc = self.procs[shard]
        if proc.poll() is not None:
            raise AssertionError(f"shard {shard} exited with {proc.returncode}:\n{self.log(shard)}")
        try:
            port = int((shard_data_dir(self.root, shard) / "metrics.port").read_text())
            status, _ = http_get(port, "/readyz", timeout=0.5)
        except (OSError, ValueError):
            return False
        return status == 200

    def wait_ready(self, shard: int, timeout: float = 20.0) -> None:
        wait_until(lambda: self.ready(shard), timeout, message=f"shard {shard} readiness")

    def kill(self, shard: int) -> None:
        """SIGKILL one shard (by its pid) and reap it."""
        proc = self.procs[shard]
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        for log in self._logs.values():
            log.close()  # type: ignore[attr-defined]


@contextlib.contextmanager
def running_cluster(tmp_path: Path, shards: int = 2, **kwargs: object) -> Iterator[ShardCluster]:
    cluster = ShardCluster(tmp_path / "data", shards, **kwargs)  # type: ignore[arg-type]
    try:
        yield cluster.start()
    finally:
        cluster.stop()
