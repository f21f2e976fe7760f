"""Per-API handlers: each module serves one API (or a tight family) and opens with the versions it
serves and the version notes. Handlers describe responses once, version-free, and let
`protocol.build.build` produce the exact version asked for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..registry import ApiHandler
from . import api_versions, describe_cluster, find_coordinator, metadata, topics

if TYPE_CHECKING:
    from ..server import CoordinatorServer


def bootstrap_handlers(server: CoordinatorServer) -> list[ApiHandler]:
    """The APIs every client needs before it can join a group."""
    return [
        api_versions.handler(server),
        metadata.handler(server),
        find_coordinator.handler(server),
        topics.create_topics_handler(server),
        topics.delete_topics_handler(server),
        describe_cluster.handler(server),
    ]
