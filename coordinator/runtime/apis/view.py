"""What the bootstrap APIs may know of the node that serves them: `NodeView`.

Handlers never receive the server. Each API factory takes only what it needs: the bootstrap APIs
(Metadata, FindCoordinator, DescribeCluster, CreateTopics, DeleteTopics) a `NodeView`, ApiVersions
the table it advertises, the group APIs the shard getter, the data plane its catalog and store. The
server builds one `NodeView` and keeps its `node` current (a listener on port 0 learns its port
only once bound).

With several shards (`coordinator.shards`, `coordinator/shards/placement.py`) this node is one of
a cluster of nodes on this machine: node `node.id + k` on each listener's port `+ k`. Every node
derives the whole cluster from the configuration (`nodes`), so it can list every node in Metadata
and DescribeCluster and name any group's node in FindCoordinator without asking the others. Node 0
(the first of `cluster`) leads every embedded partition and is the controller clients are told of.
With one shard the cluster is this node alone and nothing is hashed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from ...api.placement import GroupOwnership
from ...catalog import TopicCatalog


class AdvertisedListener(Protocol):
    """What `cluster_nodes` reads of a configured listener (`security.listeners.Listener`)."""

    @property
    def name(self) -> str: ...

    @property
    def advertised_host(self) -> str: ...

    @property
    def advertised_port(self) -> int: ...


@dataclass(frozen=True, slots=True)
class OneShard:
    """The placement of a node that is the whole cluster: every group is its own."""

    shards: int = 1

    def shard_of_group(self, group_id: str) -> int:
        return 0


@dataclass(frozen=True, slots=True)
class Node:
    """This node as clients are told of it: id and advertised address."""

    node_id: int
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class TopicDefaults:
    """How the embedded catalog creates topics clients did not declare."""

    num_partitions: int
    """`num.partitions`: for auto-created topics and CreateTopics without a count."""
    auto_create: bool
    """`auto.create.topics.enable`: Metadata creates unknown topics it is asked for."""


@dataclass(slots=True)
class NodeView:
    node: Node
    """This node on the first listener."""
    cluster_id: str
    catalog: TopicCatalog
    topic_defaults: TopicDefaults
    endpoints: dict[str, Node] = field(default_factory=dict)
    """This node as advertised on each listener, by listener name (Kafka answers Metadata and
    FindCoordinator with the endpoints of the listener the request came in on)."""
    layout: GroupOwnership = field(default_factory=OneShard)
    """Groups -> shards (`shards.placement.ShardLayout` with `coordinator.shards`, or what owns
    them); one shard unless told otherwise."""
    shard: int = 0
    """This node's shard index in `layout`."""
    nodes: dict[str, tuple[Node, ...]] = field(default_factory=dict)
    """With several shards: every node of the cluster on each listener, shard k at index k
    (derived from the configuration; fixed ports). Empty with one shard: the cluster is this node."""
    group_owner: Callable[[str, str], Node | None] | None = None
    """With the log upstream (`coordinator.log.storage=upstream`): the instance that owns a group's
    log partition now, on a listener (None while the partition has no owner); ownership moves at
    runtime, so it is asked, not derived from the configuration."""

    def node_for(self, listener: str) -> Node:
        return self.endpoints.get(listener, self.node)

    def cluster(self, listener: str) -> tuple[Node, ...]:
        """Every node, shard 0 first, as advertised on `listener`."""
        return self.nodes.get(listener) or (self.node_for(listener),)

    def data_node(self, listener: str) -> Node:
        """The node that leads every embedded partition and is named controller: shard 0's."""
        return self.cluster(listener)[0]

    @property
    def data_node_id(self) -> int:
        """Shard 0's node id (the same on every listener)."""
        return next(iter(self.nodes.values()))[0].node_id if self.nodes else self.node.node_id

    def node_of_group(self, group_id: str, listener: str) -> Node | None:
        """The node that coordinates `group_id` (Kafka's partition of the group, then its shard or
        its owning instance); None when no node does right now."""
        if self.group_owner is not None:
            return self.group_owner(group_id, listener)
        if self.layout.shards == 1:
            return self.node_for(listener)
        return self.cluster(listener)[self.layout.shard_of_group(group_id)]


def cluster_nodes(listeners: Iterable[AdvertisedListener], first_node_id: int, shards: int,
                  default_host: str) -> dict[str, tuple[Node, ...]]:
    """Every shard's node on every listener, from the listeners as configured (shard 0's): shard k
    is node `first_node_id + k` at the listener's advertised host and port `+ k`; `default_host`
    stands in for an empty advertised host. Empty with one shard (`NodeView.cluster` is this node)."""
    if shards == 1:
        return {}
    return {listener.name: tuple(Node(first_node_id + k, listener.advertised_host or default_host,
                                      listener.advertised_port + k) for k in range(shards))
            for listener in listeners}
