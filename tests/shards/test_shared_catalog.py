"""A shared topic catalog: one topics.json written by several processes (here, several catalogs on
the same file, as each shard process has one). A write is seen by every other catalog's next read;
writes are serialised by the lock file and start from the file as the last writer left it; the
watcher tells listeners of other writers' changes without any read."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from coordinator.catalog import CatalogError, TopicCatalog, TopicChange
from protocol.errors import ErrorCode


def pair(tmp_path: Path) -> tuple[TopicCatalog, TopicCatalog]:
    path = tmp_path / "topics.json"
    return TopicCatalog(path, shared=True), TopicCatalog(path, shared=True)


def test_a_write_is_seen_by_the_other_catalogs_next_read(tmp_path: Path) -> None:
    one, two = pair(tmp_path)
    changes: list[TopicChange] = []
    two.add_listener(changes.append)
    created = one.create("orders", 3)
    assert two.get("orders") == created
    assert two.by_id(created.topic_id) == created
    assert changes == [TopicChange(None, created)]  # told once, on the read that found it
    assert [t.name for t in two] == ["orders"] and len(two) == 1
    assert changes == [TopicChange(None, created)]
    grown = one.grow("orders", 5)
    assert two.get("orders") == grown and changes[-1] == TopicChange(created, grown)
    two.delete("orders")
    assert one.get("orders") is None


def test_writes_start_from_the_file_so_nothing_is_lost_or_doubled(tmp_path: Path) -> None:
    one, two = pair(tmp_path)
    one.create("a", 1)
    two.create("b", 1)  # two had never read "a": it re-reads under the lock, and keeps it
    assert [t.name for t in TopicCatalog(tmp_path / "topics.json")] == ["a", "b"]
    with pytest.raises(CatalogError) as exists:
        two.create("a", 1)
    assert exists.value.code == ErrorCode.TOPIC_ALREADY_EXISTS


def test_concurrent_writers_are_serialised_by_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "topics.json"
    catalogs = [TopicCatalog(path, shared=True) for _ in range(3)]
    refused: list[str] = []

    def write(catalog: TopicCatalog, n: int) -> None:
        for i in range(15):
            catalog.create(f"t{n}-{i}", 1)
            try:
                catalog.create(f"shared-{i}", 1)  # every writer tries; exactly one may win
            except CatalogError as exc:
                assert exc.code == ErrorCode.TOPIC_ALREADY_EXISTS
                refused.append(f"shared-{i}")

    threads = [threading.Thread(target=write, args=(c, n)) for n, c in enumerate(catalogs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    on_disk = {t.name for t in TopicCatalog(path)}
    assert on_disk == {f"t{n}-{i}" for n in range(3) for i in range(15)} | {f"shared-{i}" for i in range(15)}
    assert sorted(refused) == sorted(f"shared-{i}" for i in range(15) for _ in range(2))


@pytest.mark.asyncio
async def test_the_watcher_tells_listeners_without_any_read(tmp_path: Path) -> None:
    one, two = pair(tmp_path)
    changes: list[TopicChange] = []
    two.add_listener(changes.append)
    watching = asyncio.create_task(two.watch(0.02))
    try:
        created = one.create("late", 2)
        deadline = time.monotonic() + 5
        while not changes:
            assert time.monotonic() < deadline, "the watcher never told the listener"
            await asyncio.sleep(0.01)
        assert changes == [TopicChange(None, created)]
    finally:
        watching.cancel()


def test_an_unreadable_file_keeps_the_current_view(tmp_path: Path) -> None:
    one, two = pair(tmp_path)
    kept = one.create("kept", 1)
    assert two.get("kept") == kept
    (tmp_path / "topics.json").write_text("{not json")  # not by a catalog: the counter did not move
    two.refresh()  # what the watch does: it looks at the file itself
    assert two.get("kept") == kept  # logged, not raised
    one.create("next", 1)  # a writer starts again from the view it had
    assert {t.name for t in two} == {"kept", "next"}


def test_a_change_that_did_not_move_the_counter_is_found_by_the_watch(tmp_path: Path) -> None:
    one, two = pair(tmp_path)
    one.create("first", 1)
    assert two.get("first") is not None
    edited = TopicCatalog(tmp_path / "topics.json")  # an unshared writer (an operator's tool)
    edited.create("edited", 1)
    assert two.get("edited") is None  # reads trust the counter
    two.refresh()
    assert two.get("edited") is not None


def test_an_unshared_catalog_does_not_look_at_the_file_again(tmp_path: Path) -> None:
    path = tmp_path / "topics.json"
    alone = TopicCatalog(path)
    TopicCatalog(path).create("elsewhere", 1)
    assert alone.get("elsewhere") is None  # one process: its memory is the catalog
    alone.reload()
    assert alone.get("elsewhere") is not None


def test_a_topic_deleted_and_created_again_elsewhere_is_two_changes(tmp_path: Path) -> None:
    """Listeners keyed by topic id (the data plane's logs, KIP-848 assignments) must hear that the
    old topic is gone, not that it changed."""
    one, two = pair(tmp_path)
    old = one.create("again", 2)
    assert two.get("again") == old
    changes: list[TopicChange] = []
    two.add_listener(changes.append)
    one.delete("again")
    new = one.create("again", 2)
    assert two.get("again") == new
    assert changes == [TopicChange(old, None), TopicChange(None, new)]
    assert two.by_id(old.topic_id) is None
