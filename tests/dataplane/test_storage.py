"""Partition data on disk: acknowledged only once durable, torn tails cut at recovery, segments
rolled and deleted by retention, offsets and producer state the same after a restart.

The store runs on `MemoryFileSystem`, whose `crash()` keeps only what was fsynced (plus, if asked,
a prefix of the unsynced bytes: a write torn by power loss)."""

from __future__ import annotations

import asyncio
import os
import threading

import pytest
from kio.records.readers import read_batch

from coordinator.recordlog import FlushPolicy, MemoryFileSystem, RealFileSystem
from coordinator.recordlog.fs import AppendHandle

from .harness import Harness
from .records import NOW_MS, make_batch

pytestmark = pytest.mark.asyncio

DIR = "/data/partitions"


def durable_harness(fs: MemoryFileSystem, h: Harness | None = None, **kwargs: object) -> Harness:
    """A store on `fs` under log.flush.policy=always; over the topics of `h` after a restart."""
    restarted = Harness(catalog=h.catalog if h else None, fs=fs, directory=DIR,
                        flush_policy=FlushPolicy.ALWAYS, **kwargs)
    restarted.store.start()
    return restarted


def crash(h: Harness, fs: MemoryFileSystem, keep_unsynced_bytes: int = 0) -> None:
    """Power loss: the process (its flusher) is gone and only durable bytes remain."""
    task = h.store.flusher._task
    if task is not None:
        task.cancel()
    fs.crash(keep_unsynced_bytes)


def stored(h: Harness, topic: str, partition: int = 0) -> list[tuple[int, list[bytes | None]]]:
    """(base offset, values) of every visible batch, read back through the log (CRC checked)."""
    log = h.store.log(h.catalog.get(topic), partition)  # type: ignore[arg-type]
    out = []
    for batch in log.batches():
        parsed, _ = read_batch(batch.bytes(), 0)
        out.append((parsed.base_offset, [r.value for r in parsed.records]))
    return out


def append_unacknowledged(h: Harness, topic: str, values: list[bytes]) -> None:
    """Append as Produce does, but crash before the flusher's fsync (the client never heard ok)."""
    from coordinator.dataplane.batch import validate_produce

    batch, header = validate_produce(make_batch(values), api_version=11, max_message_bytes=10**6)
    h.store.append(h.catalog.get(topic), 0, batch, header)  # type: ignore[arg-type]


async def test_acknowledged_batches_survive_a_crash_with_their_offsets_and_the_rest_is_gone() -> None:
    fs = MemoryFileSystem()
    h = durable_harness(fs)
    h.create("t")
    for values in ([b"a", b"b"], [b"c"], [b"d", b"e", b"f"]):
        assert (await h.produce("t", 0, make_batch(values))).error_code == 0
    append_unacknowledged(h, "t", [b"lost"])
    log = h.store.log(h.catalog.get("t"), 0)  # type: ignore[arg-type]
    assert (log.log_end_offset, log.high_watermark) == (7, 6)  # written, not yet durable
    crash(h, fs)

    after = durable_harness(fs, h)
    assert stored(after, "t") == [(0, [b"a", b"b"]), (2, [b"c"]), (3, [b"d", b"e", b"f"])]
    log = after.store.log(after.catalog.get("t"), 0)  # type: ignore[arg-type]
    assert (log.log_start_offset, log.high_watermark, log.log_end_offset) == (0, 6, 6)
    assert (await after.produce("t", 0, make_batch([b"g"]))).base_offset == 6
    await after.store.close()


async def test_fetch_sees_only_durable_batches() -> None:
    fs = MemoryFileSystem()
    h = durable_harness(fs)
    h.create("t")
    append_unacknowledged(h, "t", [b"a"])
    early = h.partitions(await h.fetch([("t", 0, 0)]))[("t", 0)]
    assert early.high_watermark == 0 and not early.records
    log = h.store.log(h.catalog.get("t"), 0)  # type: ignore[arg-type]
    waiter = log.wait_durable(1)
    assert waiter is not None
    await asyncio.wait_for(waiter, 5)
    late = h.partitions(await h.fetch([("t", 0, 0)]))[("t", 0)]
    assert late.high_watermark == 1 and late.records
    await h.store.close()


@pytest.mark.parametrize("torn", [1, 12, 61, 70])
async def test_a_torn_tail_loses_only_the_unacknowledged_batch(torn: int) -> None:
    fs = MemoryFileSystem()
    h = durable_harness(fs)
    h.create("t")
    assert (await h.produce("t", 0, make_batch([b"a"]))).error_code == 0
    assert (await h.produce("t", 0, make_batch([b"b", b"c"]))).error_code == 0
    append_unacknowledged(h, "t", [b"x" * 100])
    crash(h, fs, keep_unsynced_bytes=torn)  # part of the last batch reached the disk

    after = durable_harness(fs, h)
    assert after.store.recovered_truncated_bytes == torn
    assert stored(after, "t") == [(0, [b"a"]), (1, [b"b", b"c"])]
    assert (await after.produce("t", 0, make_batch([b"d"]))).base_offset == 3
    await after.store.close()


async def test_a_corrupt_batch_and_everything_after_it_are_cut() -> None:
    fs = MemoryFileSystem()
    h = durable_harness(fs)
    h.create("t", segment_bytes="200")  # a segment per batch or two
    sizes = []
    for i in range(4):
        batch = make_batch([b"v%d" % i * 20])
        sizes.append(len(batch))
        assert (await h.produce("t", 0, batch)).error_code == 0
    await h.store.close()
    topic = h.catalog.get("t")
    assert topic is not None
    directory = f"{DIR}/{topic.topic_id}-0"
    segments = sorted(fs.list_dir(directory))
    assert len(segments) >= 3
    # Damage the second segment's first batch (a byte under the CRC): it and all later are cut.
    second = f"{directory}/{segments[1]}"
    content = bytearray(fs.content(second))
    content[-1] ^= 0xFF
    fs.write_file(second, bytes(content))
    after = durable_harness(fs, h)
    kept = stored(after, "t")
    assert kept == [(i, [b"v%d" % i * 20]) for i in range(len(kept))]
    assert len(kept) < 4
    assert after.store.recovered_truncated_bytes >= sizes[0]
    assert sorted(fs.list_dir(directory)) == segments[:2]
    await after.store.close()


async def test_segments_roll_and_retention_deletes_whole_segments_but_never_the_log_end() -> None:
    fs = MemoryFileSystem()
    h = durable_harness(fs)
    size = len(make_batch([b"v0" * 40]))
    h.create("t", segment_bytes=str(2 * size), retention_ms="1000")  # two batches a segment
    for i in range(6):
        assert (await h.produce("t", 0, make_batch([b"v%d" % i * 40], timestamps=[NOW_MS]))).error_code == 0
    topic = h.catalog.get("t")
    assert topic is not None
    directory = f"{DIR}/{topic.topic_id}-0"
    assert len(fs.list_dir(directory)) == 3
    h.clock.advance(5000)
    assert h.store.enforce_retention() > 0  # every batch is past retention.ms
    log = h.store.log(topic, 0)
    assert (log.log_start_offset, log.log_end_offset, log.size_bytes) == (6, 6, 0)
    assert sorted(fs.list_dir(directory)) == ["00000000000000000004.log"]  # the active one stays
    await h.store.close()

    after = durable_harness(fs, h)
    after.clock.advance(5000)
    after.store.enforce_retention()
    log = after.store.log(topic, 0)
    assert (log.log_start_offset, log.log_end_offset) == (6, 6)  # never backwards
    assert (await after.produce("t", 0, make_batch([b"next"]))).base_offset == 6
    await after.store.close()


async def test_idempotent_producer_state_is_rebuilt_from_the_log_after_a_crash() -> None:
    fs = MemoryFileSystem()
    h = durable_harness(fs)
    h.create("t")
    first = make_batch([b"a", b"b"], producer_id=7, producer_epoch=0, base_sequence=0)
    assert (await h.produce("t", 0, first)).base_offset == 0
    assert (await h.produce("t", 0, make_batch([b"c"], producer_id=7, producer_epoch=0, base_sequence=2))).base_offset == 2
    crash(h, fs)

    after = durable_harness(fs, h)
    retry = await after.produce("t", 0, first)  # a retry of a batch acknowledged before the crash
    assert (retry.error_code, retry.base_offset) == (0, 0)
    gap = await after.produce("t", 0, make_batch([b"e"], producer_id=7, producer_epoch=0, base_sequence=9))
    assert gap.error_code == 45  # OUT_OF_ORDER_SEQUENCE_NUMBER
    nxt = await after.produce("t", 0, make_batch([b"d"], producer_id=7, producer_epoch=0, base_sequence=3))
    assert (nxt.error_code, nxt.base_offset) == (0, 3)
    assert [offset for offset, _ in stored(after, "t")] == [0, 2, 3]
    await after.store.close()


async def test_producer_ids_are_never_handed_out_twice_across_restarts() -> None:
    fs = MemoryFileSystem()
    h = durable_harness(fs)
    ids = [(await init_producer_id(h)).producer_id for _ in range(3)]
    assert ids == [0, 1, 2]
    crash(h, fs)
    after = durable_harness(fs, h)
    again = (await init_producer_id(after)).producer_id
    assert again not in ids and again >= 3
    await after.store.close()


async def init_producer_id(h: Harness, transactional_id: str | None = None, version: int = 4):  # type: ignore[no-untyped-def]
    return await h.call(22, version, {"transactional_id": transactional_id, "transaction_timeout": 60000,
                                      "producer_id": -1, "producer_epoch": -1})


async def test_reading_empty_partitions_creates_no_files() -> None:
    fs = MemoryFileSystem()
    h = durable_harness(fs)
    h.create("wide", 50)
    await h.fetch([("wide", p, 0) for p in range(50)])
    assert (await h.list_offset("wide", 7, -1)).offset == 0
    assert fs.list_dir(DIR) == []
    assert (await h.produce("wide", 7, make_batch([b"a"]))).error_code == 0
    topic = h.catalog.get("wide")
    assert topic is not None
    assert fs.list_dir(DIR) == [f"{topic.topic_id}-7"]
    await h.store.close()


async def test_interval_policy_acknowledges_after_the_interval_fsync() -> None:
    fs = MemoryFileSystem()
    h = Harness(fs=fs, directory=DIR, flush_policy=FlushPolicy.INTERVAL, flush_interval_ms=5)
    h.store.start()
    h.create("t")
    for i in range(3):
        assert (await h.produce("t", 0, make_batch([b"%d" % i]))).base_offset == i
    crash(h, fs)
    after = durable_harness(fs, h)
    assert [offset for offset, _ in stored(after, "t")] == [0, 1, 2]
    await after.store.close()


async def test_a_failed_fsync_stops_acknowledgements_and_is_fatal() -> None:
    fs = MemoryFileSystem()
    fatal: list[BaseException] = []
    h = durable_harness(fs, on_fatal=fatal.append)
    h.create("t")
    assert (await h.produce("t", 0, make_batch([b"ok"]))).error_code == 0
    fs.fail_next("fsync")
    produce = asyncio.ensure_future(h.produce("t", 0, make_batch([b"never acknowledged"])))
    deadline = asyncio.get_running_loop().time() + 5
    while not fatal:
        assert asyncio.get_running_loop().time() < deadline, "the failed fsync was not reported"
        await asyncio.sleep(0.01)
    assert isinstance(fatal[0], OSError)
    assert not produce.done()  # the server exits on fatal; the client never hears ok
    log = h.store.log(h.catalog.get("t"), 0)  # type: ignore[arg-type]
    assert log.high_watermark == 1
    produce.cancel()


class StallingFileSystem(RealFileSystem):
    """The real filesystem, whose fsyncs wait for `release` once `stall` is set."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.stall = threading.Event()
        self.entered = asyncio.Event()
        self.release = threading.Event()

    def open_append(self, path: str) -> AppendHandle:
        inner = super().open_append(path)
        fs = self

        class Handle:
            def write(self, data: bytes) -> None:
                inner.write(data)

            def fsync(self) -> None:
                if fs.stall.is_set():
                    fs.loop.call_soon_threadsafe(fs.entered.set)
                    fs.release.wait(10)
                inner.fsync()

            def size(self) -> int:
                return inner.size()

            def truncate(self, size: int) -> None:
                inner.truncate(size)

            def close(self) -> None:
                inner.close()

        return Handle()


async def test_deleting_a_topic_while_its_fsync_is_in_flight_waits_for_the_round(tmp_path) -> None:
    fs = StallingFileSystem(asyncio.get_running_loop())
    fatal: list[BaseException] = []
    h = Harness(fs=fs, directory=str(tmp_path), flush_policy=FlushPolicy.ALWAYS, on_fatal=fatal.append,
                remove_dir=os.rmdir)
    h.store.start()
    topic = h.create("t")
    assert (await h.produce("t", 0, make_batch([b"a"]))).error_code == 0
    fs.stall.set()
    produce = asyncio.ensure_future(h.produce("t", 0, make_batch([b"b"])))
    await asyncio.wait_for(fs.entered.wait(), 5)  # the round is fsyncing in the flusher's thread
    h.catalog.delete("t")
    directory = tmp_path / f"{topic.topic_id}-0"
    assert directory.exists()  # its descriptors are in use: removal waits for the round
    fs.release.set()
    await asyncio.wait_for(produce, 5)  # answered at the deletion (the topic is gone)
    deadline = asyncio.get_running_loop().time() + 5
    while directory.exists():  # removed right after the round
        assert asyncio.get_running_loop().time() < deadline, "the deleted topic's files stayed"
        await asyncio.sleep(0.01)
    assert not fatal, fatal  # closing the descriptor under the fsync would have been EBADF
    await h.store.close()


@pytest.mark.parametrize("partial", [0, 30])
async def test_a_full_disk_refuses_the_produce_with_kafka_storage_error_and_changes_nothing(partial: int) -> None:
    import errno

    fs = MemoryFileSystem()
    h = durable_harness(fs)
    h.create("t")
    assert (await h.produce("t", 0, make_batch([b"a"]))).error_code == 0
    # ENOSPC after `partial` bytes of the batch reached the file (a short write, then the error).
    fs.fail_next("write", path_contains="/data/partitions/", partial_bytes=partial,
                 error=OSError(errno.ENOSPC, "No space left on device"))
    refused = await h.produce("t", 0, make_batch([b"lost"]))
    assert refused.error_code == 56  # KAFKA_STORAGE_ERROR
    assert refused.base_offset == -1 and "ENOSPC" in refused.error_message
    log = h.store.log(h.catalog.get("t"), 0)  # type: ignore[arg-type]
    assert (log.log_end_offset, log.high_watermark) == (1, 1)
    fetched = h.partitions(await h.fetch([("t", 0, 0)]))[("t", 0)]  # reads keep working
    assert fetched.error_code == 0 and fetched.high_watermark == 1 and fetched.records
    # Space again: the next batch takes the refused one's offset, right after the first.
    assert (await h.produce("t", 0, make_batch([b"b"]))).base_offset == 1
    crash(h, fs)
    after = durable_harness(fs, h)
    assert after.store.recovered_truncated_bytes == 0  # the short write was cut back at once
    assert stored(after, "t") == [(0, [b"a"]), (1, [b"b"])]
    await after.store.close()


async def test_a_failed_write_that_cannot_be_undone_takes_only_its_partition_offline() -> None:
    import errno

    fs = MemoryFileSystem()
    h = durable_harness(fs)
    h.create("t", partitions=2)
    assert (await h.produce("t", 0, make_batch([b"a"]))).error_code == 0
    assert (await h.produce("t", 1, make_batch([b"a"]))).error_code == 0
    topic = h.catalog.get("t")
    assert topic is not None
    fs.fail_next("write", path_contains=f"{topic.topic_id}-0/", partial_bytes=10,
                 error=OSError(errno.EIO, "Input/output error"))
    fs.fail_next("truncate", path_contains=f"{topic.topic_id}-0/")
    assert (await h.produce("t", 0, make_batch([b"b"]))).error_code == 56
    assert (await h.produce("t", 0, make_batch([b"c"]))).error_code == 56  # its end is unknown
    assert (await h.produce("t", 1, make_batch([b"b"]))).error_code == 0
    assert stored(h, "t", 0) == [(0, [b"a"])]
    crash(h, fs, keep_unsynced_bytes=10)
    after = durable_harness(fs, h)
    assert stored(after, "t", 0) == [(0, [b"a"])]  # recovery cut the junk the write left
    assert (await after.produce("t", 0, make_batch([b"c"]))).base_offset == 1
    await after.store.close()


async def test_a_read_the_disk_fails_answers_that_partition_kafka_storage_error_and_serves_the_others() -> None:
    import errno

    fs = MemoryFileSystem()
    h = durable_harness(fs)
    h.create("t", partitions=2)
    for partition in (0, 1):
        assert (await h.produce("t", partition, make_batch([b"v%d" % partition]))).error_code == 0
    await h.store.close()
    after = durable_harness(fs, h)  # recovered batches are read from disk, not memory
    topic = after.catalog.get("t")
    assert topic is not None
    fs.fail_next("read", path_contains=f"{topic.topic_id}-0/", error=OSError(errno.EIO, "Input/output error"))
    failing = after.partitions(await after.fetch([("t", 0, 0), ("t", 1, 0)]))
    assert failing[("t", 0)].error_code == 56 and not failing[("t", 0)].records  # KAFKA_STORAGE_ERROR
    assert failing[("t", 1)].error_code == 0 and failing[("t", 1)].records
    again = after.partitions(await after.fetch([("t", 0, 0)]))
    assert again[("t", 0)].error_code == 0 and again[("t", 0)].records
    fs.fail_next("read", path_contains=f"{topic.topic_id}-0/", error=OSError(errno.EIO, "Input/output error"))
    assert (await after.list_offset("t", 0, 0)).error_code == 56  # a timestamp lookup reads the batch
    found = await after.list_offset("t", 0, 0)
    assert (found.error_code, found.offset) == (0, 0)
    await after.store.close()
