"""Data plane throughput in process: Produce and Fetch through codec decode -> handler -> encode.

Prints requests/s and MB/s for each. Usage: .venv/bin/python bench/dataplane_throughput.py [seconds]
The store writes to segment files in a temporary directory with log.flush.policy=none (written,
not fsynced: the CPU cost of the path; `bench/dataplane_produce_e2e.py` measures with fsyncs).
"""

from __future__ import annotations

import asyncio
import inspect
import shutil
import struct
import sys
import tempfile
import time
import uuid
from typing import Any

from crc32c import crc32c

from coordinator.api.registry import ApiRegistry, RequestContext
from coordinator.catalog.catalog import TopicCatalog
from coordinator.dataplane import DataPlaneConfig, PartitionStore, dataplane_handlers
from coordinator.recordlog import FlushPolicy, RealFileSystem
from protocol.build import build
from protocol.client import encode_request, request_class
from protocol.codec import RequestCodec, encode_response


def batch(records: int, value_size: int) -> bytes:
    body = bytearray()
    for i in range(records):
        rec = b"\x00\x00" + bytes([i * 2]) + b"\x01" + bytes([value_size * 2 & 0x7F | 0x80, value_size * 2 >> 7]) + b"x" * value_size + b"\x00"
        body += bytes([len(rec) * 2 & 0x7F | 0x80, len(rec) * 2 >> 7]) + rec
    now = time.time_ns() // 1_000_000
    tail = struct.pack(">hiqqqhii", 0, records - 1, now, now, -1, -1, -1, records) + bytes(body)
    return struct.pack(">qiibI", 0, 9 + len(tail), -1, 2, crc32c(tail)) + tail


async def run(seconds: float) -> None:
    catalog = TopicCatalog(None, id_factory=uuid.uuid4)
    catalog.create("bench", 1)
    config = DataPlaneConfig()
    directory = tempfile.mkdtemp(prefix="dataplane-bench-")
    store = PartitionStore(catalog, config, fs=RealFileSystem(), directory=directory, flush_policy=FlushPolicy.NONE)
    store.open()
    registry = ApiRegistry(dataplane_handlers(catalog, store, config))
    codec = RequestCodec(registry.version_ranges())
    records = batch(10, 100)

    async def call(api_key: int, version: int, frame: bytes) -> int:
        decoded = codec.decode(frame[4:])
        ctx = RequestContext(1, "bench", "127.0.0.1", api_key, version, decoded.correlation_id)
        handler = registry.get(api_key)
        assert handler is not None
        result: Any = handler.handle(ctx, decoded.body)
        if inspect.isawaitable(result):
            result = await result
        return len(encode_response(decoded.correlation_id, result))

    produce = encode_request(0, 1, "bench", build(request_class(0, 9), {
        "acks": -1, "timeout": 1000,
        "topic_data": [{"name": "bench", "partition_data": [{"index": 0, "records": records}]}],
    }))
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        await call(0, 9, produce)
        n += 1
    elapsed = time.perf_counter() - start
    print(f"produce v9   {n / elapsed:10.0f} req/s  {n * len(records) / elapsed / 1e6:8.1f} MB/s  ({len(records)} B batches)")

    end = store.log(catalog.get("bench"), 0).log_end_offset  # type: ignore[arg-type]
    m, out, start, offset = 0, 0, time.perf_counter(), store.log(catalog.get("bench"), 0).log_start_offset  # type: ignore[arg-type]
    while time.perf_counter() - start < seconds:
        fetch = encode_request(1, 1, "bench", build(request_class(1, 12), {
            "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20, "session_epoch": -1,
            "topics": [{"topic": "bench", "partitions": [
                {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20}]}],
        }))
        out += await call(1, 12, fetch)
        m += 1
        offset = offset + 10 * 100 if offset + 1000 < end else store.log(catalog.get("bench"), 0).log_start_offset  # type: ignore[arg-type]
    elapsed = time.perf_counter() - start
    print(f"fetch v12    {m / elapsed:10.0f} req/s  {out / elapsed / 1e6:8.1f} MB/s  (up to 1 MiB responses)")
    print(f"retained     {store.total_bytes / 1e6:.1f} MB in {len(store.log(catalog.get('bench'), 0))} batches")  # type: ignore[arg-type]
    await store.close()
    shutil.rmtree(directory)


if __name__ == "__main__":
    asyncio.run(run(float(sys.argv[1]) if len(sys.argv) > 1 else 2.0))
