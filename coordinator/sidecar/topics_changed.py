"""Sidecar mode over several shards: one shard's news that the upstream's topics changed, for all.

Each shard reads the upstream's topics on its own (`cluster.UpstreamCluster`), every
`upstream.metadata.max.age.ms` or at once when it has a reason. A forwarded CreateTopics,
DeleteTopics or CreatePartitions is such a reason, but only the shard that forwarded it sees it;
the groups that care (a regex subscription matching the new topic) may live on another shard.
So the forwarding shard announces it: a counter in `<data dir>/sidecar-topics.lock`, memory-mapped
by every shard (`catalog.shared.SharedFile`, the shared catalog's change counter). Every shard
looks at the counter every `WATCH_INTERVAL_S` (a memory read) and, when it moved, asks for a
Metadata refresh, which is coalesced with any other like every refresh request.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from ..catalog.shared import SharedFile

WATCH_INTERVAL_S = 0.1
FILE_NAME = "sidecar-topics"


class TopicsChanged:
    def __init__(self, root: Path) -> None:
        self._shared = SharedFile(root / FILE_NAME)

    def announce(self) -> None:
        """This shard forwarded a change of the upstream's topics: the others refresh too."""
        with self._shared.locked():
            self._shared.wrote()

    async def watch(self, refresh: Callable[[], None]) -> None:
        """Call `refresh` whenever another shard announced a change, until cancelled."""
        self._shared.look()
        while True:
            await asyncio.sleep(WATCH_INTERVAL_S)
            if self._shared.moved():
                self._shared.look()
                refresh()
