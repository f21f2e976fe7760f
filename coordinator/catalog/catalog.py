"""The embedded topic catalog.

Owns every topic's name, UUID topic id and partition count. Topics come from the `topics=` config
declaration, from CreateTopics, and from auto-creation on Metadata; DeleteTopics removes them and
CreatePartitions-style growth raises a count. Topic ids must survive restarts (KIP-848 assignments
refer to topics by id), so the catalog is persisted to `<data-dir>/topics.json`, written to a
temporary file, fsynced and renamed. Listeners are told of every change so consumer groups subscribed
to a topic can bump their epoch. A change the disk refuses to save (full) is taken back and refused
with KAFKA_STORAGE_ERROR (CreateTopics, DeleteTopics; Metadata's auto-creation answers
UNKNOWN_TOPIC_OR_PARTITION, as for any failed creation).

Validation follows Kafka (`Topic.validate`): names of 1..249 characters from `[a-zA-Z0-9._-]`, not
`.` or `..`; partition counts >= 1.

Shared catalogs (`shared=True`: several shard processes, one `topics.json`): every node serves the
same topics, and a change made on one node is seen by all before its response is sent.
- Writes are serialised across processes by a lock (`shared.SharedFile`); under it the writer
  re-reads the file (another node may have written since), validates, changes, saves (temporary
  file, fsync, rename) and counts the change before it lets go.
- Every read first checks the change counter (a memory read) and, when it moved, re-reads the
  file: a client told "created" by one node and then asking another finds the topic there.
- `watch()` looks at the file periodically too and tells listeners of changes made elsewhere, so
  consumer groups get new partitions (and shard 0's data plane drops deleted topics) unasked.
A one-process catalog (`shared=False`, the default) does none of this.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from protocol.errors import ErrorCode

from ..logging import get_logger
from ..storage_errors import StorageLog, error_kind
from .shared import SharedFile

log = get_logger("coordinator.catalog")
_storage = StorageLog("coordinator.catalog")

WATCH_INTERVAL_S = 0.2
"""How often a shared catalog looks for changes made by other processes when nobody reads it."""

# Kafka error codes the catalog reports (same numbers as Kafka's Errors.java).

_LEGAL_NAME = re.compile(r"[a-zA-Z0-9._-]+")
MAX_NAME_LENGTH = 249


class CatalogError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class Topic:
    name: str
    topic_id: uuid.UUID
    num_partitions: int
    configs: dict[str, str] = field(default_factory=dict, compare=False, hash=False)

    @property
    def is_internal(self) -> bool:
        return self.name.startswith("__")


@dataclass(frozen=True, slots=True)
class TopicChange:
    """A catalog change: `before` None = created, `after` None = deleted, both = altered."""

    before: Topic | None
    after: Topic | None


Listener = Callable[[TopicChange], None]


def validate_topic_name(name: str) -> None:
    if not name:
        raise CatalogError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise CatalogError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name cannot be \".\" or \"..\"")
    if len(name) > MAX_NAME_LENGTH:
        raise CatalogError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters",
        )
    if not _LEGAL_NAME.fullmatch(name):
        raise CatalogError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic name \"{name}\" is illegal, it contains a character other than "
            "ASCII alphanumerics, '.', '_' and '-'",
        )


class TopicCatalog:
    """Name and id indexed topics, optionally persisted to a JSON file."""

    def __init__(self, path: Path | None = None, id_factory: Callable[[], uuid.UUID] = uuid.uuid4, *,
                 shared: bool = False) -> None:
        """`shared`: other processes write the same file (see the module notes)."""
        self._path = path
        self._new_id = id_factory
        self._by_name: dict[str, Topic] = {}
        self._by_id: dict[uuid.UUID, Topic] = {}
        self._listeners: list[Listener] = []
        self._sharing = SharedFile(path) if shared and path is not None else None
        if path is not None and path.exists():
            if self._sharing is not None:
                self._sharing.look()
                self._sharing.seen = self._sharing.signature()
            self._load(path)

    # -- reads -------------------------------------------------------------------------------
    def get(self, name: str) -> Topic | None:
        if self._sharing is not None and self._sharing.moved():
            self.refresh()
        return self._by_name.get(name)

    def by_id(self, topic_id: uuid.UUID) -> Topic | None:
        if self._sharing is not None and self._sharing.moved():
            self.refresh()
        return self._by_id.get(topic_id)

    def __iter__(self) -> Iterator[Topic]:
        if self._sharing is not None and self._sharing.moved():
            self.refresh()
        return iter(sorted(self._by_name.values(), key=lambda t: t.name))

    def __len__(self) -> int:
        if self._sharing is not None and self._sharing.moved():
            self.refresh()
        return len(self._by_name)

    def add_listener(self, listener: Listener) -> None:
        self._listeners.append(listener)

    # -- writes ------------------------------------------------------------------------------
    def validate_new(self, name: str, num_partitions: int) -> None:
        if self._sharing is not None and self._sharing.moved():
            self.refresh()
        validate_topic_name(name)
        if name in self._by_name:
            raise CatalogError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if num_partitions < 1:
            raise CatalogError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")

    def create(self, name: str, num_partitions: int, configs: dict[str, str] | None = None) -> Topic:
        with self._writing():
            self.validate_new(name, num_partitions)
            topic = Topic(name, self._new_id(), num_partitions, dict(configs or {}))
            self._by_name[name] = topic
            self._by_id[topic.topic_id] = topic
            self._save()
        self._notify(TopicChange(None, topic))
        return topic

    def delete(self, name: str) -> Topic:
        with self._writing():
            topic = self._by_name.pop(name, None)
            if topic is None:
                raise CatalogError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                   "This server does not host this topic-partition.")
            del self._by_id[topic.topic_id]
            self._save()
        self._notify(TopicChange(topic, None))
        return topic

    def grow(self, name: str, num_partitions: int) -> Topic:
        with self._writing():
            topic = self._by_name.get(name)
            if topic is None:
                raise CatalogError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                   "This server does not host this topic-partition.")
            if num_partitions <= topic.num_partitions:
                raise CatalogError(
                    ErrorCode.INVALID_PARTITIONS,
                    f"Topic currently has {topic.num_partitions} partitions, which is higher than or "
                    f"equal to the requested {num_partitions}.",
                )
            grown = Topic(topic.name, topic.topic_id, num_partitions, topic.configs)
            self._by_name[name] = grown
            self._by_id[grown.topic_id] = grown
            self._save()
        self._notify(TopicChange(topic, grown))
        return grown

    # -- persistence -------------------------------------------------------------------------
    def reload(self) -> None:
        """Re-read the file (a standby taking over sees what the previous owner wrote), telling
        listeners of every difference."""
        if self._path is None or not self._path.exists():
            return
        # The signature before reading: a file replaced meanwhile is read again next time.
        seen = self._sharing.signature() if self._sharing is not None else None
        before = self._by_name
        self._by_name = self._read(self._path)  # raises, keeping the current view, if unreadable
        self._by_id = {topic.topic_id: topic for topic in self._by_name.values()}
        if self._sharing is not None:
            self._sharing.seen = seen
        for name, topic in before.items():
            now = self._by_name.get(name)
            if now is None or now.topic_id != topic.topic_id:  # deleted (perhaps created again)
                self._notify(TopicChange(topic, None))
        for name, topic in self._by_name.items():
            was = before.get(name)
            if was is None or was.topic_id != topic.topic_id:
                self._notify(TopicChange(None, topic))
            elif was != topic:
                self._notify(TopicChange(was, topic))

    # -- sharing between processes ---------------------------------------------------------------
    def refresh(self) -> None:
        """Re-read the file if another process replaced it since this one last read or wrote it,
        telling listeners of every difference. A file that cannot be read keeps the current view
        (logged once per change of the file)."""
        sharing = self._sharing
        if sharing is None or not sharing.look():
            return
        try:
            self.reload()
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            sharing.seen = sharing.signature()
            log.error("topic_catalog_unreadable", path=str(self._path), error=str(exc))

    async def watch(self, interval_s: float = WATCH_INTERVAL_S) -> None:
        """Look for other processes' changes every `interval_s` until cancelled (shared catalogs)."""
        while True:
            await asyncio.sleep(interval_s)
            self.refresh()

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """A shared catalog changes under the lock, starting from the file as the last writer left it."""
        if self._sharing is None:
            with self._undone_if_unsaved():
                yield
            return
        with self._sharing.locked():
            self.refresh()
            with self._undone_if_unsaved():
                yield

    @contextlib.contextmanager
    def _undone_if_unsaved(self) -> Iterator[None]:
        """A change the disk refuses to save (full: ENOSPC) is taken back in memory too, and refused
        with KAFKA_STORAGE_ERROR: a topic exists only once its file says so."""
        by_name, by_id = dict(self._by_name), dict(self._by_id)
        try:
            yield
        except OSError as exc:
            self._by_name, self._by_id = by_name, by_id
            _storage.failed("catalog_write_refused", "catalog", exc)
            raise CatalogError(ErrorCode.KAFKA_STORAGE_ERROR,
                               f"the topic catalog could not be saved ({error_kind(exc)})") from exc

    def _notify(self, change: TopicChange) -> None:
        for listener in self._listeners:
            listener(change)

    def _load(self, path: Path) -> None:
        self._by_name = self._read(path)
        self._by_id = {topic.topic_id: topic for topic in self._by_name.values()}

    @staticmethod
    def _read(path: Path) -> dict[str, Topic]:
        data = json.loads(path.read_text())
        topics = (Topic(entry["name"], uuid.UUID(entry["topic_id"]), int(entry["num_partitions"]),
                        dict(entry.get("configs", {}))) for entry in data.get("topics", []))
        return {topic.name: topic for topic in topics}

    def _save(self) -> None:
        if self._path is None:
            return
        body = json.dumps(
            {
                "version": 1,
                "topics": [
                    {
                        "name": t.name,
                        "topic_id": str(t.topic_id),
                        "num_partitions": t.num_partitions,
                        "configs": t.configs,
                    }
                    for t in self
                ],
            },
            indent=1,
        )
        tmp = self._path.with_suffix(".json.tmp")
        try:
            with open(tmp, "w") as f:
                f.write(body)
                f.flush()
                os.fsync(f.fileno())
        except OSError:
            with contextlib.suppress(OSError):
                tmp.unlink()  # the space it took
            raise
        os.replace(tmp, self._path)
        dir_fd = os.open(self._path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        if self._sharing is not None:
            self._sharing.wrote()  # under the lock: counted before anyone is answered
