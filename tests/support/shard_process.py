"""Shard processes for a test or a benchmark: `coordinator serve --shard K` of a layout with
`shards` shards, node `node.id + K` listening on `port + K`, each with its own metrics port.
The data directory must already have the layout (`coordinator.shards.reshard.ensure_layout`):
a shard process does not move partitions, `coordinator serve` (or its supervisor) does."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from tests.support.server import ServerProcess, free_port


class ShardProcess(ServerProcess):
    """Shard `shard` of `shards`; `port` is the base port (shard 0's)."""

    def __init__(self, data_dir: Path, shard: int, shards: int, port: int,
                 overrides: dict[str, str] | None = None, metrics_port: int | None = None) -> None:
        super().__init__(data_dir, {"coordinator.shards": str(shards), **(overrides or {})}, port=port,
                         metrics_port=metrics_port or free_port(), extra_args=("--shard", str(shard)))
        self.shard = shard
        self.log_path = data_dir.parent / f"shard-{shard}-of-{shards}-{port}.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port + self.shard}"

    @property
    def node_port(self) -> int:
        return self.port + self.shard


@contextlib.contextmanager
def running_shards(data_dir: Path, shards: int, port: int, overrides: dict[str, str] | None = None
                   ) -> Iterator[list[ShardProcess]]:
    """Every shard of the layout, started (in parallel) and ready; stopped on exit."""
    procs = [ShardProcess(data_dir, k, shards, port, overrides) for k in range(shards)]
    try:
        for proc in procs:
            proc.start(wait=False)
        for proc in procs:
            proc.wait_ready(timeout=60)
        yield procs
    finally:
        for proc in procs:
            proc.stop()
