"""What the group side reads of a topic catalog, whichever source fills it.

Two sources implement it: the embedded `TopicCatalog` (records of our own, persisted to
topics.json) and the sidecar's `UpstreamCatalog` (the upstream cluster's Metadata). Consumer groups
take a snapshot and then every change through `add_listener`; they never learn which source it is.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Protocol

from .catalog import Topic, TopicChange


class TopicSource(Protocol):
    def get(self, name: str) -> Topic | None: ...

    def by_id(self, topic_id: uuid.UUID) -> Topic | None: ...

    def __iter__(self) -> Iterator[Topic]: ...

    def __len__(self) -> int: ...

    def add_listener(self, listener: Callable[[TopicChange], None]) -> None: ...
