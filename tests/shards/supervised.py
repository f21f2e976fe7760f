"""A sharded `coordinator serve` (the supervisor and its shard processes) as a child of a test.

The supervisor's children are found through /proc (psutil): each is `... serve ... --shard K`.
Ports: shard k listens on port + k, so a run needs `shards` consecutive free ports."""

from __future__ import annotations

from pathlib import Path

import psutil

from coordinator.catalog import TopicCatalog
from coordinator.shards.placement import ShardLayout
from tests.support.server import ServerProcess, free_port_block, http_get, wait_until


def free_ports(count: int) -> int:
    """A port p with p .. p+count-1 all free now (`tests.support.server.free_port_block`)."""
    return free_port_block(count)


def group_on_shard(shard: int, shards: int, prefix: str, partitions: int = 50) -> str:
    """The first `<prefix>-<n>` group id that lands on `shard` (Kafka's hash, then p % shards)."""
    layout = ShardLayout(partitions, shards)
    return next(f"{prefix}-{n}" for n in range(1000) if layout.shard_of_group(f"{prefix}-{n}") == shard)


def create_topics(data_dir: Path, topics: dict[str, int]) -> None:
    """Write the shared topic catalog before any shard starts: every shard loads it as it starts."""
    data_dir.mkdir(parents=True, exist_ok=True)
    catalog = TopicCatalog(data_dir / "topics.json")
    for name, partitions in topics.items():
        catalog.create(name, partitions)


class Supervised(ServerProcess):
    """`coordinator serve` with `coordinator.shards` = `shards`, run by its supervisor."""

    def __init__(self, data_dir: Path, shards: int = 2, overrides: dict[str, str] | None = None,
                 port: int | None = None, metrics_port: int | None = None) -> None:
        super().__init__(data_dir, overrides={"coordinator.shards": str(shards), **(overrides or {})},
                         port=port or free_ports(shards), metrics_port=metrics_port)
        self.shards = shards

    def shard_port(self, shard: int) -> int:
        return self.port + shard

    def children(self) -> dict[int, int]:
        """shard -> pid of the supervisor's live shard processes."""
        assert self.proc is not None
        found: dict[int, int] = {}
        try:
            kids = psutil.Process(self.proc.pid).children()
        except psutil.NoSuchProcess:
            return found
        for kid in kids:
            try:
                cmdline = kid.cmdline()
                if kid.status() == psutil.STATUS_ZOMBIE or "--shard" not in cmdline:
                    continue
            except psutil.NoSuchProcess:
                continue
            found[int(cmdline[cmdline.index("--shard") + 1])] = kid.pid
        return found

    def kill_shard(self, shard: int) -> int:
        """SIGKILL shard `shard`'s process; its pid."""
        pid = self.children()[shard]
        psutil.Process(pid).kill()
        return pid

    def wait_restarted(self, shard: int, old_pid: int, timeout: float = 30.0) -> int:
        """The shard's new process is up and every shard is ready again; its pid."""
        pid = wait_until(lambda: (p := self.children().get(shard)) not in (None, old_pid) and p,
                         timeout, message=f"shard {shard} restarted")
        wait_until(self.ready, timeout, message="every shard ready")
        return int(pid)

    def metrics_text(self) -> str:
        status, body = http_get(self.metrics_port, "/metrics")
        assert status == 200
        return body.decode()


def gone(pid: int) -> bool:
    """The process has exited (a zombie not yet reaped counts as exited)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True
