"""What the bootstrap APIs may know of the node that serves them: `NodeView`.

Handlers never receive the server. Each API factory takes only what it needs: the bootstrap APIs
(Metadata, FindCoordinator, DescribeCluster, CreateTopics, DeleteTopics) a `NodeView`, ApiVersions
the table it advertises, the group APIs the shard getter, the data plane its catalog and store. The
server builds one `NodeView` and keeps its `node` current (a listener on port 0 learns its port
only once bound).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...catalog import TopicCatalog


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

    def node_for(self, listener: str) -> Node:
        return self.endpoints.get(listener, self.node)
