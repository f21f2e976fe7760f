"""The node's tables keyed by API number come from the declarations: sidecar mode registers what is
declared served here (the sidecar's own ApiVersions and FindCoordinator in place of the embedded
ones) and forwards the rest; the offset import gates exactly the APIs declared to wait for it."""

from __future__ import annotations

from coordinator.api.declaration import ApiDeclaration, SidecarRoute
from coordinator.catalog import TopicCatalog
from coordinator.node.apis import assemble, served_by_sidecar
from coordinator.runtime.apis import (
    Node,
    NodeView,
    TopicDefaults,
    bootstrap_handlers,
    group_handlers,
)
from coordinator.security.apis import security_handlers

METADATA, CREATE_TOPICS, DELETE_TOPICS, DESCRIBE_CLUSTER, API_VERSIONS, FIND_COORDINATOR = 3, 19, 20, 60, 18, 10


def declared() -> list[ApiDeclaration]:
    view = NodeView(Node(1, "127.0.0.1", 9092), "cluster", TopicCatalog(None), TopicDefaults(1, True))
    return [*bootstrap_handlers(view, dict), *group_handlers(lambda: None), *security_handlers(lambda: None)]


def test_sidecar_mode_registers_what_is_served_here_and_forwards_the_rest() -> None:
    apis = declared()
    own_versions = ApiDeclaration(API_VERSIONS, 0, 4, authorization=apis[0].authorization,
                                  placement=apis[0].placement, sidecar=SidecarRoute.SERVED)
    served = served_by_sidecar(apis, [own_versions])
    keys = {d.api_key for d in served}
    assert keys.isdisjoint({METADATA, CREATE_TOPICS, DELETE_TOPICS, DESCRIBE_CLUSTER})
    assert {API_VERSIONS, FIND_COORDINATOR, 11, 12, 68, 17, 36, 29} <= keys
    assert next(d for d in served if d.api_key == API_VERSIONS) is own_versions
    assert len(keys) == len(served)  # the override replaced the embedded one: one per key


def test_the_offset_import_waits_for_the_apis_that_name_a_group_to_import() -> None:
    waiting = {d.api_key for d in declared() if d.sidecar is SidecarRoute.SERVED_AFTER_IMPORT}
    # JoinGroup, ConsumerGroupHeartbeat, OffsetCommit, OffsetFetch, OffsetDelete, DeleteGroups,
    # StreamsGroupHeartbeat (an app moving to the streams protocol keeps its offsets)
    assert waiting == {11, 68, 8, 9, 47, 42, 88}


def test_every_declared_api_assembles_closed() -> None:
    apis = assemble(declared(), None)
    assert all(d.authorization is not None and d.sidecar is not None for d in apis)
    assert all(d.placement is not None for d in apis if d.conversion is not None)
