"""Security writes from shard k to shard 0: `SecurityChannel` (shard 0's end) and
`SecurityForwarder` (every other shard's end).

SCRAM credentials and ACLs live in shard 0's log alone (the other shards keep a read-only copy,
`security_mirror.py`). A CreateAcls, DeleteAcls or AlterUserScramCredentials that reaches shard
k >= 1 is authorized there, against its copy, as any request is; then its core request is handed to
shard 0 over a Unix socket in the root data directory (`security.sock`), as Kafka's brokers forward
these requests to the controller.

- Trust: the socket is in the data directory and only its owner may open it (mode 0600); whoever
  can, can write the logs anyway. Shard 0 takes what comes as already authorized: the channel
  carries nothing but these three core requests, with the principal and the shard that authorized
  it (for shard 0's log line).
- Shard 0 opens the socket once its log is loaded (under its data-directory lock, so a stale socket
  of a killed predecessor is removed by the one process that may), and applies each request
  through its `ShardRuntime` like one of its own clients' (the one release rule: the answer leaves
  once the entry is durable). The answer carries the core response and the log's durable end at
  that moment: every entry below it, the request's own included, is durable and readable.
- Shard k then waits until its copy has read shard 0's log up to that offset, so the change is in
  force on the shard that answers the client (on the others within one tail interval). If that
  takes over `MIRROR_WAIT_S` (it should not: the entry is on disk) the client is answered anyway,
  the change being durable.
- Shard 0 down (restarting): shard k tries to reach it for `FORWARD_TIMEOUT_S`, then answers
  REQUEST_TIMED_OUT, retriable, as Kafka's ForwardingManager answers when the controller does not
  answer in time. A connection lost after the request was sent is REQUEST_TIMED_OUT as well (the
  write may or may not have happened, as with any timeout); shard 0 still loading is
  COORDINATOR_LOAD_IN_PROGRESS.

Frames: a 4-byte big-endian length, then msgpack: the request is [api name, shard, principal,
encoded core request], the answer [error code, encoded core response or nil, durable end].
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import struct
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from protocol.errors import ErrorCode

from ..logging import get_logger
from ..security import requests as core

if TYPE_CHECKING:
    from ..runtime.shard import ShardRuntime
    from ..security.store import SecurityStore
    from .security_mirror import SecurityMirror

log = get_logger("coordinator.shards.security_channel")

SOCKET_NAME = "security.sock"
FORWARD_TIMEOUT_S = 5.0
"""How long shard k tries to reach shard 0, and then waits for its answer, before REQUEST_TIMED_OUT."""
MIRROR_WAIT_S = 5.0
"""How long shard k waits for its copy to read the answered entry before answering anyway."""
_RETRY_S = 0.1
_MAX_FRAME = 64 * 1024 * 1024
_LENGTH = struct.Struct(">I")

WRITES: dict[str, tuple[type, type]] = {
    "CreateAcls": (core.CreateAcls, core.CreateAclsResponse),
    "DeleteAcls": (core.DeleteAcls, core.DeleteAclsResponse),
    "AlterScramCredentials": (core.AlterScramCredentials, core.AlterScramCredentialsResponse),
}
"""The only requests the channel carries: core request type and its response type, by name."""

_encode = msgspec.msgpack.Encoder().encode


def socket_path(root: Path) -> Path:
    return root / SOCKET_NAME


@contextlib.contextmanager
def _addressable(path: Path) -> Iterator[str]:
    """`path` as bind/connect can take it: a Unix socket address is at most 107 bytes, so a longer
    one is reached through this process's handle on its directory (/proc/self/fd/N/name)."""
    if len(os.fsencode(path)) < 100:
        yield str(path)
        return
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)


async def _read_frame(reader: asyncio.StreamReader) -> Any:
    (size,) = _LENGTH.unpack(await reader.readexactly(_LENGTH.size))
    if size > _MAX_FRAME:
        raise ValueError(f"frame of {size} bytes")
    return msgspec.msgpack.decode(await reader.readexactly(size))


def _write_frame(writer: asyncio.StreamWriter, message: Any) -> None:
    body = _encode(message)
    writer.write(_LENGTH.pack(len(body)) + body)


class SecurityChannel:
    """Shard 0's end: serves the security writes the other shards forward."""

    def __init__(self, root: Path, shard: Callable[[], ShardRuntime | None], durable_end: Callable[[], int]) -> None:
        self.path = socket_path(root)
        self._shard = shard
        self._durable_end = durable_end
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()  # a killed predecessor's (we hold the root's lock: no one else's)
        with _addressable(self.path) as address:
            self._server = await asyncio.start_unix_server(self._serve, address)
            os.chmod(address, 0o600)  # owner only (the directory is the trust boundary anyway)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            for task in list(self._tasks):
                task.cancel()
            await self._server.wait_closed()
            self._server = None
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            while True:
                try:
                    api, shard, principal, body = await _read_frame(reader)
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                _write_frame(writer, await self._apply(api, shard, principal, body))
                await writer.drain()
        except (KeyError, ValueError, TypeError, msgspec.DecodeError) as exc:  # not one of ours: drop it
            log.warning("security_channel_bad_frame", error=str(exc))
        except (ConnectionError, asyncio.CancelledError):
            pass  # a cancelled handler ends quietly: asyncio's stream server logs a cancelled one as a crash
        finally:
            if task is not None:
                self._tasks.discard(task)
            writer.close()

    async def _apply(self, api: str, shard: int, principal: str, body: bytes) -> list[Any]:
        request_type, _ = WRITES[api]  # KeyError: not a security write
        request: Any = msgspec.msgpack.decode(body, type=request_type)
        runtime = self._shard()
        if runtime is None or not runtime.loaded:
            return [ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, None, 0]
        log.info("security_write_forwarded", api=api, principal=principal, from_shard=shard)
        try:
            response = await runtime.submit(msgspec.structs.replace(request, ref=runtime.new_ref()))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a core bug or the shard unloading: the client gets a retriable no
            log.error("security_write_failed", api=api, exc_info=exc)
            return [ErrorCode.UNKNOWN_SERVER_ERROR, None, 0]
        return [ErrorCode.NONE, _encode(response), self._durable_end()]


class SecurityForwarder:
    """Shard k's end: hands an authorized security write to shard 0 and waits for its copy."""

    def __init__(self, root: Path, shard: int, mirror: SecurityMirror,
                 store: Callable[[], SecurityStore | None]) -> None:
        self.path = socket_path(root)
        self.shard = shard
        self.mirror = mirror
        self._store = store

    def store(self) -> SecurityStore | None:
        """The copy the reads are answered from, once the shard serves (None before)."""
        return self._store()

    async def forward(self, principal: str, request: Any) -> Any:
        """The core response, or an ErrorCode (int) for the whole request."""
        api = type(request).__name__
        _, response_type = WRITES[api]
        deadline = time.monotonic() + FORWARD_TIMEOUT_S
        connection = await self._connect(deadline)
        if connection is None:
            log.warning("security_write_not_forwarded", api=api, reason="shard 0 unreachable")
            return ErrorCode.REQUEST_TIMED_OUT
        reader, writer = connection
        try:
            _write_frame(writer, [api, self.shard, principal, _encode(request)])
            await writer.drain()
            code, body, offset = await asyncio.wait_for(_read_frame(reader), FORWARD_TIMEOUT_S)
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError, ValueError, msgspec.DecodeError) as exc:
            log.warning("security_write_not_forwarded", api=api, reason=type(exc).__name__)
            return ErrorCode.REQUEST_TIMED_OUT
        finally:
            writer.close()
        if code != ErrorCode.NONE:
            return int(code)
        response: Any = msgspec.msgpack.decode(body, type=response_type)
        if not await self.mirror.wait_for(offset, MIRROR_WAIT_S):
            log.warning("security_mirror_behind", api=api, offset=offset, read=self.mirror.next_offset)
        return response

    async def _connect(self, deadline: float) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        while True:
            try:
                with _addressable(self.path) as address:
                    return await asyncio.open_unix_connection(address)
            except (FileNotFoundError, ConnectionError):
                if time.monotonic() + _RETRY_S > deadline:
                    return None
                await asyncio.sleep(_RETRY_S)
