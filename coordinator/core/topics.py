"""The core's pure snapshot of topic metadata, and RE2 regex resolution against it.

The core may not import the catalog (it is I/O: a JSON file, listeners). The runtime therefore posts
the catalog into the shard as data: one :class:`~coordinator.core.requests.TopicsChanged` snapshot
before the shard serves anything, then one delta per catalog change. :class:`TopicsImage` is what
those events build; it is soft state (Kafka's metadata image is not part of the group coordinator's
log either): a restarted shard gets a fresh snapshot from the runtime.

It belongs to the shard, not to one group type: the shard applies each ``TopicsChanged`` and hands
it to every registration (``ShardContext.topics``), and offsets read it too (OffsetCommit by topic
id). Consumer groups read it to turn subscribed names into topic ids, to size topics for the
assignors, to compute each group's metadata hash (KIP-1101) and to resolve regex subscriptions; the
streams and share group types will read it the same way.

Regexes use RE2 (``google-re2``), like Kafka's RE2J, with full-match semantics: ``^pre.*`` matches
``prefix`` but ``pre`` does not match ``prefix``. Python's ``re`` is never used on client patterns.
Resolutions are cached per pattern and invalidated by the image ``version``, which every change
bumps.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple
from uuid import UUID

import re2

if TYPE_CHECKING:  # requests.py imports TopicInfo from here
    from coordinator.core.requests import TopicsChanged


class TopicInfo(NamedTuple):
    """One topic as the coordinator sees it."""

    topic_id: UUID
    name: str
    num_partitions: int


class InvalidRegexError(ValueError):
    """The pattern is not a valid RE2 regular expression."""


_RE2_OPTIONS: Any = re2.Options()
_RE2_OPTIONS.log_errors = False  # a bad client pattern is an answer, not a server log line


def compile_regex(pattern: str) -> Any:
    """Compile ``pattern`` with RE2; raises :class:`InvalidRegexError`."""
    try:
        return re2.compile(pattern, options=_RE2_OPTIONS)
    except re2.error as exc:
        detail = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise InvalidRegexError(detail) from None


class TopicsImage:
    """Topics by name and by id, plus a per-version regex resolution cache."""

    __slots__ = ("_by_id", "_by_name", "_compiled", "_resolved", "version")

    def __init__(self, topics: Iterable[TopicInfo] = ()) -> None:
        self._by_name: dict[str, TopicInfo] = {}
        self._by_id: dict[UUID, TopicInfo] = {}
        self._resolved: dict[str, tuple[int, frozenset[str]]] = {}
        self._compiled: dict[str, Any] = {}
        self.version = 0
        self.replace(topics)

    # ---- reads -------------------------------------------------------------------------------

    def by_name(self, name: str) -> TopicInfo | None:
        return self._by_name.get(name)

    def by_id(self, topic_id: UUID) -> TopicInfo | None:
        return self._by_id.get(topic_id)

    def __iter__(self) -> Iterator[TopicInfo]:
        return iter(self._by_name.values())

    def __len__(self) -> int:
        return len(self._by_name)

    def resolve(self, pattern: str) -> frozenset[str]:
        """The topic names ``pattern`` fully matches (cached until the image changes).

        The pattern must already be valid (see :func:`compile_regex`); "" matches nothing.
        """
        if not pattern:
            return frozenset()
        cached = self._resolved.get(pattern)
        if cached is not None and cached[0] == self.version:
            return cached[1]
        compiled = self._compiled.get(pattern)
        if compiled is None:
            compiled = self._compiled[pattern] = compile_regex(pattern)
        names = frozenset(name for name in self._by_name if compiled.fullmatch(name) is not None)
        self._resolved[pattern] = (self.version, names)
        return names

    def metadata_hash(self, names: Iterable[str]) -> int:
        """A stable signed 64-bit hash of the named topics' ids and partition counts.

        Kafka 4.1+ keeps such a hash in ``ConsumerGroupMetadataValue`` (KIP-1101) and bumps the group
        epoch when it changes. Names that do not exist contribute nothing; 0 when none exists.
        """
        digest = hashlib.blake2b(digest_size=8)
        found = False
        for name in sorted(names):
            topic = self._by_name.get(name)
            if topic is None:
                continue
            found = True
            digest.update(f"{name}\0{topic.topic_id}\0{topic.num_partitions}\n".encode())
        if not found:
            return 0
        return int.from_bytes(digest.digest(), "big", signed=True)

    # ---- writes (only the shard's TopicsChanged handler calls these) ---------------------------

    def apply(self, event: TopicsChanged) -> frozenset[str]:
        """Take a catalog change; returns the names of the topics it concerned (for a snapshot:
        every name before and after)."""
        names = {t.name for t in event.topics}
        for topic_id in event.deleted:
            info = self.by_id(topic_id)
            if info is not None:
                names.add(info.name)
        if event.snapshot:
            names |= {t.name for t in self}
            self.replace(event.topics)
        else:
            self.upsert(event.topics)
            self.delete(event.deleted)
        return frozenset(names)

    def replace(self, topics: Iterable[TopicInfo]) -> None:
        self._by_name.clear()
        self._by_id.clear()
        self.upsert(topics)

    def upsert(self, topics: Iterable[TopicInfo]) -> None:
        for topic in topics:
            old = self._by_id.get(topic.topic_id)
            if old is not None and old.name != topic.name:
                self._by_name.pop(old.name, None)
            previous = self._by_name.get(topic.name)
            if previous is not None and previous.topic_id != topic.topic_id:
                self._by_id.pop(previous.topic_id, None)  # a re-created topic has a new id
            self._by_name[topic.name] = topic
            self._by_id[topic.topic_id] = topic
        self.version += 1

    def delete(self, topic_ids: Iterable[UUID]) -> None:
        for topic_id in topic_ids:
            topic = self._by_id.pop(topic_id, None)
            if topic is not None and self._by_name.get(topic.name) == topic:
                del self._by_name[topic.name]
        self.version += 1
