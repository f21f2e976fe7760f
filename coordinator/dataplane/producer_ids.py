"""Producer ids for InitProducerId: unique across restarts, handed out from persisted blocks.

Kafka's brokers take blocks of 1000 ids from the controller (`ProducerIdManager`); here the block
is taken from a file, `<partitions dir>/producer-ids`, holding the first id not yet handed out in
any block. Taking a block rewrites the file (temporary file, fsync, rename, directory fsync) before
any id of the block is handed out, so a restart never hands out an id twice, whatever the flush
policy: reusing an id would make a new producer's batches look like duplicates of an old one's.

With several shards every node answers InitProducerId (clients send it to any broker): shard k
hands out ids from its own file in its own directory, starting at `k << SHARD_ID_BITS`, so the ids
of different shards never meet (shard 0 would need 2^40 ids to reach shard 1's).
"""

from __future__ import annotations

from coordinator.recordlog import FileSystem

BLOCK_SIZE = 1000
FILE_NAME = "producer-ids"
SHARD_ID_BITS = 40


class ProducerIdAllocator:
    def __init__(self, fs: FileSystem, directory: str, first_id: int = 0) -> None:
        """`first_id`: the lowest id this allocator hands out (`shard << SHARD_ID_BITS`)."""
        self._fs = fs
        self._directory = directory
        self._path = f"{directory}/{FILE_NAME}"
        self._next = first_id
        self._block_end = first_id
        try:
            reader = fs.open_read(self._path)
        except FileNotFoundError:
            return
        try:
            text = reader.read(0, 64).decode("ascii").strip()
        finally:
            reader.close()
        if not text.isdigit():
            raise ValueError(f"{self._path}: expected the next producer id block, found {text!r}")
        self._next = self._block_end = max(first_id, int(text))

    def allocate(self) -> int:
        if self._next >= self._block_end:
            self._persist(self._next + BLOCK_SIZE)
        producer_id = self._next
        self._next += 1
        return producer_id

    def _persist(self, block_end: int) -> None:
        temporary = f"{self._path}.tmp"
        handle = self._fs.open_append(temporary)
        try:
            handle.truncate(0)
            handle.write(b"%d\n" % block_end)
            handle.fsync()
        finally:
            handle.close()
        self._fs.rename(temporary, self._path)
        self._fs.fsync_dir(self._directory)
        self._block_end = block_end
