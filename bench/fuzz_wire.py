"""A structure-aware fuzzer for the Kafka listener: hostile frames at a live server.

    python -m bench.fuzz_wire --frames 1000000            # starts its own server, prints a JSON report
    python -m bench.fuzz_wire --bootstrap 127.0.0.1:9092  # against a server already running

Frames (each a complete or deliberately broken Kafka frame, sent pipelined over a few connections):

- **structured** (88 %): a request of an API and version the server advertises, every
  field filled with a hostile value of its Kafka type: empty, huge and odd strings (group and topic
  names come from a small pool, so requests meet real groups and topics), -1/0/MIN/MAX integers,
  random bytes, null where nullable, arrays of 0–3 (sometimes 40) elements, nested to depth 4;
- **mutated** (8 %): such a frame with 1–4 bytes flipped after the size prefix, or its body truncated and
  reframed honestly;
- **junk** (4 %): a plausible header (served key and version) with a random body, or random bytes with
  a random size prefix, or a size prefix promising more than ever comes (then the connection ends).

A connection the server closes (as it must for undecodable frames) is replaced; one that stops
reading (a JoinGroup parked for a rebalance) is dropped after a short wait, as a hostile client
would. Frames the server actually read are counted on its side (`read_by_server`: requests
answered plus connections closed for a bad frame, from `/metrics`, less the probes); a run goes on
until that count reaches the target. What is checked is the server's business (`tests/security/test_fuzz.py`): it is alive, no
handler raised (`handler_failed`, `core_handler_failed`), and groups still work afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime
import json
import random
import struct
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import NoneType, UnionType
from typing import Any, get_args, get_origin

from protocol.client import decode_response, encode_request, request_class
from protocol.errors import ErrorCode
from protocol.schemas import request_schema

ApiVersionsRequest = request_class(18, 3)

_SIZE = struct.Struct(">i")
_NAMES = ("g0", "g1", "g2", "t0", "t1", "orders", "", "range", "consumer", "uniform", "*", "__consumer_offsets")
_INTS = {"int8": (-128, 127), "int16": (-32768, 32767), "int32": (-(2**31), 2**31 - 1),
         "int64": (-(2**63), 2**63 - 1), "uint16": (0, 65535), "uint32": (0, 2**32 - 1)}
_MAX_DEPTH = 4
KEEPS, RISKY, HANGS = 0, 1, 2
STRUCTURED, MUTATED, JUNK = 0.88, 0.08, 0.04
"""Shares of the three kinds: most frames parse (so they reach the handlers and the connection
stays open); the rest close their connection, which costs a reconnect."""


def _odd_string(rng: random.Random) -> str:
    kind = rng.randrange(6)
    if kind == 0:
        return "x" * rng.choice((249, 250, 1000, 20000))
    if kind == 1:
        return "".join(chr(rng.randrange(0x20, 0x2FFF)) for _ in range(rng.randrange(1, 20)))
    if kind == 2:
        return rng.choice(("\0", "a\0b", "../..", "%s%n", "User:*", "=2C", "n,,n=a,r=b"))
    if kind == 3:
        return f"m-{uuid.UUID(int=rng.getrandbits(128))}"
    return "".join(chr(rng.randrange(0x21, 0x7F)) for _ in range(rng.randrange(0, 40)))


class Generator:
    """Hostile values for every field of a kio request entity, by Kafka type."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def request(self, api_key: int, version: int) -> Any:
        cls = request_schema(api_key, version)
        return cls(**self._fields(cls, 0))

    def _fields(self, cls: Any, depth: int) -> dict[str, Any]:
        return {f.name: self._value(f, f.type, depth) for f in dataclasses.fields(cls)}

    def _value(self, spec: dataclasses.Field[Any], tp: Any, depth: int) -> Any:
        rng = self.rng
        nullable = False
        if get_origin(tp) is UnionType:
            args = [a for a in get_args(tp) if a is not NoneType]
            nullable, tp = len(args) < len(get_args(tp)), args[0]
        if nullable and rng.random() < 0.15:
            return None
        if get_origin(tp) is tuple:
            inner = get_args(tp)[0]
            count = 40 if rng.random() < 0.02 else rng.randrange(0, 4)
            if depth >= _MAX_DEPTH:
                count = 0
            return tuple(self._value(spec, inner, depth + 1) for _ in range(count))
        if dataclasses.is_dataclass(tp):
            return tp(**self._fields(tp, depth + 1))
        kafka_type = spec.metadata.get("kafka_type", "")
        if kafka_type in _INTS:
            low, high = _INTS[kafka_type]
            choice = rng.randrange(8)
            value = (low, high, -1, 0, 1, rng.randrange(2, 10), rng.randrange(0, 100000), rng.randrange(low, high))[choice]
            return tp(max(low, min(high, value)))
        if kafka_type == "string":
            return rng.choice(_NAMES) if rng.random() < 0.7 else _odd_string(rng)
        if kafka_type in ("bytes", "records"):
            return rng.randbytes(rng.choice((0, 0, 1, 8, 64, 300)))
        if kafka_type == "bool":
            return rng.random() < 0.5
        if kafka_type == "uuid":
            return uuid.UUID(int=0) if rng.random() < 0.3 else uuid.UUID(int=rng.getrandbits(128))
        if kafka_type == "timedelta_i32":
            return datetime.timedelta(milliseconds=rng.choice((-1, 0, 1, 100, 6000, 300000, 2**31 - 1)))
        if kafka_type == "timedelta_i64":
            return datetime.timedelta(milliseconds=rng.choice((-1, 0, 1, 100, 10**12)))
        if kafka_type == "float64":
            return rng.choice((0.0, -1.0, 1e308))
        if kafka_type == "error_code":
            return rng.choice(list(ErrorCode))
        raise TypeError(f"no generator for {kafka_type!r} ({spec.name})")


@dataclass
class Report:
    frames: int = 0
    structured: int = 0
    mutated: int = 0
    junk: int = 0
    connections: int = 0
    closed_by_server: int = 0
    abandoned: int = 0
    probes: int = 0
    """ApiVersions sent after a risky frame to learn the server read it (not fuzz frames)."""
    seconds: float = 0.0
    apis: set[int] = field(default_factory=set)

    def as_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["apis"] = len(self.apis)
        out["frames_per_second"] = round(self.frames / self.seconds) if self.seconds else 0
        return out


class Fuzzer:
    def __init__(self, host: str, port: int, seed: int, versions: dict[int, tuple[int, int]]) -> None:
        self.host, self.port = host, port
        self.rng = random.Random(seed)
        self.generator = Generator(self.rng)
        self.targets = [(key, v) for key, (low, high) in sorted(versions.items()) for v in range(low, high + 1)]
        self.report = Report()
        self._corpus: list[tuple[int, bytes]] = []

    def _structured(self) -> tuple[int, bytes]:
        # Once there is a corpus, mostly one made before (fresh kio encoding is the fuzzer's own
        # bottleneck); the mutations make even a reused frame new most of the time.
        if len(self._corpus) >= 512 and self.rng.random() < 0.85:
            return self.rng.choice(self._corpus)
        for _ in range(10):
            api_key, version = self.rng.choice(self.targets)
            try:
                frame = encode_request(api_key, self.rng.getrandbits(31), self.rng.choice(("fuzz", "", None)),
                                       self.generator.request(api_key, version))
            except Exception:  # a value kio cannot encode in this version: make another
                continue
            if len(self._corpus) < 4096:
                self._corpus.append((api_key, frame))
            else:
                self._corpus[self.rng.randrange(4096)] = (api_key, frame)
            return api_key, frame
        return 18, encode_request(18, 1, "fuzz", ApiVersionsRequest(client_software_name="f", client_software_version="1"))

    def frame(self) -> tuple[bytes, int]:
        """(bytes, what it does to the connection): KEEPS it open, is RISKY (may close it: the
        batch ends there and a probe follows, so frames are not written after one that closed
        it), or HANGS it (a size promising bytes that never come: the connection ends there)."""
        rng = self.rng
        roll = rng.random()
        api_key, good = self._structured()
        self.report.apis.add(api_key)
        if roll < STRUCTURED:
            self.report.structured += 1
            return good, KEEPS
        if roll < STRUCTURED + MUTATED:
            self.report.mutated += 1
            body = bytearray(good[4:])
            if rng.random() < 0.6 and len(body) > 8:
                for _ in range(rng.randrange(1, 5)):
                    body[rng.randrange(len(body))] = rng.getrandbits(8)
            else:
                body = body[:rng.randrange(0, len(body))]
            return _SIZE.pack(len(body)) + bytes(body), RISKY
        self.report.junk += 1
        if roll < 1 - JUNK * 0.5:
            key, version = rng.choice(self.targets)
            body = struct.pack(">hhi", key, version, rng.getrandbits(31)) + rng.randbytes(rng.randrange(0, 200))
            return _SIZE.pack(len(body)) + body, RISKY
        if roll < 1 - JUNK * 0.1:
            size = rng.choice((-1, 0, 3, 7, 2**31 - 1, rng.randrange(8, 64)))
            body = rng.randbytes(rng.randrange(0, 64))
            return _SIZE.pack(size) + body, HANGS if size >= 8 and len(body) < size else RISKY
        return _SIZE.pack(rng.randrange(64, 4096)) + b"\x00" * rng.randrange(0, 32), HANGS

    async def run(self, frames: int, connections: int) -> Report:
        started = time.perf_counter()
        await asyncio.gather(*(self._worker(frames // connections + (i < frames % connections))
                               for i in range(connections)))
        self.report.seconds = time.perf_counter() - started
        return self.report

    async def _worker(self, budget: int) -> None:
        sent = 0
        while sent < budget:
            reader, writer = await asyncio.open_connection(self.host, self.port)
            self.report.connections += 1
            answers = _Answers(reader)
            try:
                while sent < budget and not answers.closed:
                    batch = []
                    effect = KEEPS
                    for _ in range(min(32, budget - sent)):
                        data, effect = self.frame()
                        batch.append(data)
                        sent += 1
                        if effect != KEEPS:
                            break
                    self.report.frames += len(batch)
                    if effect == RISKY:  # then a probe: go on only once the server has read the batch
                        batch.append(_PROBE)
                        self.report.probes += 1
                    writer.write(b"".join(batch))
                    try:
                        await asyncio.wait_for(writer.drain(), 0.2)
                        if effect == RISKY:
                            await asyncio.wait_for(answers.probed(), 0.2)
                    except TimeoutError:
                        self.report.abandoned += 1  # the server stopped reading us: a parked request
                        break
                    if effect == HANGS:
                        break
                if answers.closed:
                    self.report.closed_by_server += 1
            except (ConnectionError, OSError):
                self.report.closed_by_server += 1
            finally:
                answers.stop()
                writer.transport.abort()


_PROBE_ID = 0x7EADBEEF
_PROBE = encode_request(18, _PROBE_ID, "fuzz-probe", ApiVersionsRequest(client_software_name="f",
                                                                       client_software_version="1"))


class _Answers:
    """Reads the server's answers (so its writes never back up) and notes the probe's and EOF."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader
        self._buffer = b""
        self.closed = False
        self._probe = asyncio.Event()
        self._task = asyncio.ensure_future(self._run())

    async def probed(self) -> None:
        """The probe was answered, or the connection closed (the server read the frames before it)."""
        await self._probe.wait()
        self._probe.clear()

    async def _run(self) -> None:
        try:
            while chunk := await self._reader.read(1 << 16):
                buffer = self._buffer + chunk
                start = 0
                while len(buffer) - start >= 8:
                    size = _SIZE.unpack_from(buffer, start)[0]
                    if len(buffer) - start - 4 < size:
                        break
                    if _SIZE.unpack_from(buffer, start + 4)[0] == _PROBE_ID:
                        self._probe.set()
                    start += 4 + size
                self._buffer = buffer[start:]
        except (ConnectionError, OSError):
            pass
        self.closed = True
        self._probe.set()

    def stop(self) -> None:
        self._task.cancel()


async def served_versions(host: str, port: int) -> dict[int, tuple[int, int]]:
    """The server's own ApiVersions table (the fuzzer targets exactly what it advertises)."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        request = ApiVersionsRequest(client_software_name="fuzz", client_software_version="1")
        writer.write(encode_request(18, 1, "fuzz", request))
        size = _SIZE.unpack(await reader.readexactly(4))[0]
        payload = await reader.readexactly(size)
        _, body = decode_response(18, 3, payload)
        return {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in body.api_keys}
    finally:
        writer.close()


async def fuzz(host: str, port: int, frames: int, seed: int = 1, connections: int = 4) -> Report:
    versions = await served_versions(host, port)
    return await Fuzzer(host, port, seed, versions).run(frames, connections)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--bootstrap", help="host:port of a running server (default: start one)")
    parser.add_argument("--keep", metavar="DIR", help="start the server in DIR and keep its data and log")
    parser.add_argument("--guarded", action="store_true",
                        help="ACLs on: everything allowed but creating and deleting topics (tests/security/test_fuzz.py)")
    args = parser.parse_args(argv)
    if args.bootstrap:
        host, port = args.bootstrap.rsplit(":", 1)
        report = asyncio.run(fuzz(host, int(port), args.frames, args.seed, args.connections))
        print(json.dumps(report.as_dict()))
        return 0
    import tempfile
    from pathlib import Path

    from tests.security.test_fuzz import fuzz_until

    if args.keep:
        Path(args.keep).mkdir(parents=True, exist_ok=True)
        print(json.dumps(fuzz_until(Path(args.keep), args.frames, args.seed, args.connections, args.guarded)))
        return 0
    with tempfile.TemporaryDirectory() as directory:
        print(json.dumps(fuzz_until(Path(directory), args.frames, args.seed, args.connections, args.guarded)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
