"""Reference servers the suite measures the coordinator against, in the same run.

- `canned`: splits frames and answers each with a precomputed response (correlation id patched);
  the ceiling of a Python uvloop server on this machine (mostly the kernel's loopback TCP).
- `decode`: decodes every request with kio (as the coordinator does), then builds and encodes a
  default response with kio's own writers (no group logic; member id and epoch are echoed).
  This is the baseline of the suite's ratios: group logic + our encoding vs. a kio round trip.
- `mock`: librdkafka's built-in mock cluster (confluent-kafka, `test.mock.num.brokers`), a peer
  implementation of both group protocols in C; prints the loopback address it listens on.

Run: `python -m bench.refservers {canned|decode|mock} [--port N]`; prints `listening HOST:PORT`
and serves until stdin closes or SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import struct
import sys
import threading
from typing import Any

from protocol.build import build
from protocol.codec import RequestCodec, encode_response
from protocol.schemas import response_schema

_SIZE = struct.Struct(">i")
_HEAD = struct.Struct(">hhi")

# (api_key, version) the load generator's hot scenarios use.
SERVED = {12: (4, 4), 68: (1, 1), 8: (8, 8)}


def _default(api_key: int, body: Any) -> dict[str, Any]:
    if api_key == 68:
        return {"member_id": body.member_id, "member_epoch": max(body.member_epoch, 1),
                "heartbeat_interval": 5000, "assignment": None}
    if api_key == 8:
        return {"topics": [{"name": t.name, "partitions": [{"partition_index": p.partition_index}
                                                           for p in t.partitions]} for t in body.topics]}
    return {}


class _Base(asyncio.Protocol):
    def __init__(self) -> None:
        self._buf = bytearray()
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        end = len(buf)
        pos = 0
        out: list[bytes] = []
        while end - pos >= 4:
            (size,) = _SIZE.unpack_from(buf, pos)
            if end - pos - 4 < size:
                break
            out.append(self.answer(bytes(buf[pos + 4: pos + 4 + size])))
            pos += 4 + size
        if pos:
            del buf[:pos]
        if out and self._transport is not None:
            self._transport.write(b"".join(out))

    def answer(self, frame: bytes) -> bytes:
        raise NotImplementedError


def _canned_tails() -> dict[tuple[int, int], bytes]:
    tails = {}
    for api_key, (version, _) in SERVED.items():
        cls = response_schema(api_key, version)
        body: Any = {"member_id": "m", "member_epoch": 1, "heartbeat_interval": 5000} if api_key == 68 else {}
        if api_key == 8:
            body = {"topics": [{"name": "t", "partitions": [{"partition_index": 0}]}]}
        tails[(api_key, version)] = encode_response(0, build(cls, body))[8:]
    return tails


class Canned(_Base):
    TAILS = _canned_tails()

    def answer(self, frame: bytes) -> bytes:
        api_key, version, cid = _HEAD.unpack_from(frame, 0)
        tail = self.TAILS[(api_key, version)]
        return _SIZE.pack(len(tail) + 4) + _SIZE.pack(cid) + tail


class DecodeOnly(_Base):
    CODEC = RequestCodec(SERVED)

    def answer(self, frame: bytes) -> bytes:
        request = self.CODEC.decode(frame)
        cls = response_schema(request.api_key, request.api_version)
        return encode_response(request.correlation_id, build(cls, _default(request.api_key, request.body)))


async def serve(kind: str, host: str, port: int) -> None:
    loop = asyncio.get_running_loop()
    factory = Canned if kind == "canned" else DecodeOnly
    server = await loop.create_server(factory, host, port, reuse_address=True)
    bound = server.sockets[0].getsockname()
    print(f"listening {bound[0]}:{bound[1]}", flush=True)
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    threading.Thread(target=lambda: (sys.stdin.read(), loop.call_soon_threadsafe(stop.set)), daemon=True).start()
    await stop.wait()
    server.close()


def mock() -> None:
    from confluent_kafka import Producer

    producer = Producer({"test.mock.num.brokers": 1, "log_level": 0})
    broker = next(iter(producer.list_topics(timeout=10).brokers.values()))
    print(f"listening {broker.host}:{broker.port}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    while not stop.wait(0.2):
        producer.poll(0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("kind", choices=["canned", "decode", "mock"])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    if args.kind == "mock":
        mock()
        return
    import uvloop

    uvloop.run(serve(args.kind, args.host, args.port))


if __name__ == "__main__":
    main()
