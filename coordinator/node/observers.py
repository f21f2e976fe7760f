"""The shard's observers installed into a node, once its core is loaded (`install`): the per-group
metrics and Kafka's mirrored metrics, and the rebalance history (`coordinator/history`), which sees
every event, buffered and written off the loop. The history is opened only then, under the data
directory's lock, so one process appends to it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core.shard import CoordinatorShard
from ..history.assignments import CoreAssignments
from ..history.writer import open_writer
from ..runtime import group_metrics, kafka_metrics
from ..runtime.shard import ShardRuntime

if TYPE_CHECKING:
    from .server import CoordinatorServer


def install(server: CoordinatorServer, shard: ShardRuntime, core: CoordinatorShard) -> None:
    shard.add_observer(group_metrics.observer(server.config["metrics.group.labels.enable"]))
    group_metrics.register_shard(lambda: server.shard if server._loaded else None)
    shard.add_observer(kafka_metrics.observe)
    server._assignments = CoreAssignments(core)
    server.history = open_writer(server.data_dir, server.config, server._assignments,
                                 node_id=server.config["node.id"] + server.shard_index)
    if server.history is not None:
        shard.add_observer(server.history.observe)
        server.history.start()
