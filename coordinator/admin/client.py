"""A small asyncio Kafka-protocol client for the admin commands.

Owns: connecting to a bootstrap address, negotiating API versions (ApiVersions v3, falling back to
v0 for brokers that do not know it), sending one request at a time per connection with a deadline,
decoding responses with kio, and routing: the group coordinator of a group (FindCoordinator) and the
brokers of the cluster and leaders of partitions (Metadata).

Requests are described version-free, as mappings with Kafka's snake_case field names, and built for
the highest version both sides support (`protocol.build.build`): fields a version lacks are ignored,
fields left out take their defaults. Callers that must change the shape of a request across versions
ask `Connection.version(api_key)` first.

Every failure surfaces as `AdminError` with a message an operator can act on (which address, which
API, which error code), never as a raw socket or decoding exception.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from protocol.build import build
from protocol.client import ResponseDecodeError, decode_response, encode_request, request_class
from protocol.errors import ErrorCode
from protocol.private import DESCRIBE_GROUP_GENERATIONS, DESCRIBE_SHARE_PARTITIONS

API_VERSIONS = 18
METADATA = 3
FIND_COORDINATOR = 10
LIST_GROUPS = 16
DESCRIBE_GROUPS = 15
DELETE_GROUPS = 42
OFFSET_FETCH = 9
OFFSET_COMMIT = 8
LIST_OFFSETS = 2
CONSUMER_GROUP_DESCRIBE = 69
STREAMS_GROUP_DESCRIBE = 89
SHARE_GROUP_DESCRIBE = 77
DESCRIBE_SHARE_GROUP_OFFSETS = 90
ALTER_SHARE_GROUP_OFFSETS = 91
DELETE_SHARE_GROUP_OFFSETS = 92

CLIENT_VERSIONS: dict[int, tuple[int, int]] = {
    API_VERSIONS: (0, 3),
    METADATA: (1, 12),  # v0 means "all topics" for an empty list; v13 adds nothing we use
    FIND_COORDINATOR: (0, 6),
    LIST_GROUPS: (0, 5),
    DESCRIBE_GROUPS: (0, 6),
    DELETE_GROUPS: (0, 2),
    OFFSET_FETCH: (2, 9),  # v2+: null topics means every committed partition; v10 uses topic ids
    OFFSET_COMMIT: (2, 9),  # v10 uses topic ids
    LIST_OFFSETS: (1, 10),
    CONSUMER_GROUP_DESCRIBE: (0, 1),
    STREAMS_GROUP_DESCRIBE: (0, 0),
    SHARE_GROUP_DESCRIBE: (1, 1),
    DESCRIBE_SHARE_GROUP_OFFSETS: (0, 1),
    ALTER_SHARE_GROUP_OFFSETS: (0, 0),
    DELETE_SHARE_GROUP_OFFSETS: (0, 0),
}
"""The API versions this client can build and read, by API key."""

API_NAMES = {
    API_VERSIONS: "ApiVersions", METADATA: "Metadata", FIND_COORDINATOR: "FindCoordinator",
    LIST_GROUPS: "ListGroups", DESCRIBE_GROUPS: "DescribeGroups", DELETE_GROUPS: "DeleteGroups",
    OFFSET_FETCH: "OffsetFetch", OFFSET_COMMIT: "OffsetCommit", LIST_OFFSETS: "ListOffsets",
    CONSUMER_GROUP_DESCRIBE: "ConsumerGroupDescribe", STREAMS_GROUP_DESCRIBE: "StreamsGroupDescribe",
    SHARE_GROUP_DESCRIBE: "ShareGroupDescribe", DESCRIBE_SHARE_GROUP_OFFSETS: "DescribeShareGroupOffsets",
    ALTER_SHARE_GROUP_OFFSETS: "AlterShareGroupOffsets", DELETE_SHARE_GROUP_OFFSETS: "DeleteShareGroupOffsets",
    DESCRIBE_GROUP_GENERATIONS: "DescribeGroupGenerations", DESCRIBE_SHARE_PARTITIONS: "DescribeSharePartitions",
}

_SIZE = struct.Struct(">i")
_MAX_FRAME = 256 * 1024 * 1024


class AdminError(Exception):
    """A failure the CLI reports as one line and exit code 1."""


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"ERROR_{code}"


def parse_address(raw: str) -> tuple[str, int]:
    host, sep, port = raw.strip().rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise AdminError(f"bad address {raw!r}: expected host:port")
    return host.strip("[]"), int(port)


@dataclass(frozen=True, slots=True)
class Broker:
    node_id: int
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    topic: str
    partition: int
    leader_id: int
    error_code: int


@dataclass(slots=True)
class ClusterMetadata:
    brokers: dict[int, Broker] = field(default_factory=dict)
    partitions: dict[str, list[PartitionInfo]] = field(default_factory=dict)
    """Partitions by topic, in partition order; a topic the cluster does not know is absent."""
    topic_errors: dict[str, int] = field(default_factory=dict)


class Connection:
    """One connection to one broker: one request in flight at a time, versions negotiated."""

    def __init__(self, address: tuple[str, int], reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter, client_id: str, timeout: float) -> None:
        self.address = address
        self._reader = reader
        self._writer = writer
        self._client_id = client_id
        self._timeout = timeout
        self._correlation = 0
        self._lock = asyncio.Lock()
        self.server_versions: dict[int, tuple[int, int]] = {}

    @property
    def label(self) -> str:
        return f"{self.address[0]}:{self.address[1]}"

    @classmethod
    async def open(cls, address: tuple[str, int], client_id: str, timeout: float) -> Connection:
        host, port = address
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
        except TimeoutError as exc:
            raise AdminError(f"{host}:{port}: connection timed out after {timeout:g}s") from exc
        except OSError as exc:
            raise AdminError(f"{host}:{port}: cannot connect: {exc.strerror or exc}") from exc
        return cls(address, reader, writer, client_id, timeout)

    async def negotiate(self) -> None:
        """ApiVersions v3 (KIP-511); a broker that predates it answers UNSUPPORTED_VERSION in v0."""
        try:
            response = await self.request(API_VERSIONS, {
                "client_software_name": "coordinator-admin", "client_software_version": "1",
            }, version=3)
            code = int(response.error_code)
        except AdminError:
            code = ErrorCode.UNSUPPORTED_VERSION
        if code == ErrorCode.UNSUPPORTED_VERSION:
            response = await self.request(API_VERSIONS, {}, version=0)
            code = int(response.error_code)
        if code:
            raise AdminError(f"{self.label}: ApiVersions failed with {error_name(code)}")
        self.server_versions = {
            int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys
        }

    def supports(self, api_key: int) -> bool:
        return self._intersection(api_key) is not None

    def version(self, api_key: int) -> int:
        """The highest version of `api_key` both this client and the broker speak."""
        span = self._intersection(api_key)
        if span is None:
            served = self.server_versions.get(api_key)
            broker = "none" if served is None else f"{served[0]}–{served[1]}"
            ours = CLIENT_VERSIONS[api_key]
            raise AdminError(
                f"{self.label} does not serve {API_NAMES.get(api_key, api_key)} in a version this "
                f"client speaks (broker: {broker}, "
                f"client: {ours[0]}–{ours[1]})"
            )
        return span[1]

    def _intersection(self, api_key: int) -> tuple[int, int] | None:
        served = self.server_versions.get(api_key)
        ours = CLIENT_VERSIONS.get(api_key)
        if served is None or ours is None:
            return None
        low, high = max(served[0], ours[0]), min(served[1], ours[1])
        return (low, high) if low <= high else None

    async def request(self, api_key: int, data: Mapping[str, Any], version: int | None = None) -> Any:
        """Build, send and await one request; returns the kio response entity."""
        api_version = self.version(api_key) if version is None else version
        name = API_NAMES.get(api_key, str(api_key))
        entity = build(request_class(api_key, api_version), data)
        async with self._lock:
            self._correlation += 1
            correlation_id = self._correlation
            try:
                self._writer.write(encode_request(api_key, correlation_id, self._client_id, entity))
                await asyncio.wait_for(self._writer.drain(), self._timeout)
                (size,) = _SIZE.unpack(await asyncio.wait_for(self._reader.readexactly(4), self._timeout))
                if not 0 < size <= _MAX_FRAME:
                    raise AdminError(f"{self.label}: {name} response has an invalid size {size}")
                payload = await asyncio.wait_for(self._reader.readexactly(size), self._timeout)
            except TimeoutError as exc:
                raise AdminError(f"{self.label}: {name} v{api_version} timed out after {self._timeout:g}s") from exc
            except asyncio.IncompleteReadError as exc:
                raise AdminError(f"{self.label}: connection closed during {name} v{api_version}") from exc
            except OSError as exc:
                raise AdminError(f"{self.label}: {name} v{api_version} failed: {exc}") from exc
        try:
            answered_id, body = decode_response(api_key, api_version, payload)
        except ResponseDecodeError as exc:
            raise AdminError(f"{self.label}: cannot decode {name} v{api_version} response: {exc}") from exc
        if answered_id != correlation_id:
            raise AdminError(f"{self.label}: {name} response correlation id "
                             f"{answered_id} != {correlation_id}")
        return body

    async def close(self) -> None:
        self._writer.close()
        with contextlib.suppress(OSError):
            await self._writer.wait_closed()


class AdminClient:
    """Connections to a cluster reached through a bootstrap list (`host:port[,host:port...]`)."""

    def __init__(self, bootstrap: str, timeout: float = 10.0, client_id: str = "coordinator-admin") -> None:
        self._bootstrap = [parse_address(item) for item in bootstrap.split(",") if item.strip()]
        if not self._bootstrap:
            raise AdminError("--bootstrap needs at least one host:port")
        self._timeout = timeout
        self._client_id = client_id
        self._connections: dict[tuple[str, int], Connection] = {}
        self._bootstrap_connection: Connection | None = None

    async def __aenter__(self) -> AdminClient:
        await self.bootstrap()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def bootstrap(self) -> Connection:
        if self._bootstrap_connection is not None:
            return self._bootstrap_connection
        failures = []
        for address in self._bootstrap:
            try:
                self._bootstrap_connection = await self.connect(address)
                return self._bootstrap_connection
            except AdminError as exc:
                failures.append(str(exc))
        raise AdminError("no bootstrap server reachable: " + "; ".join(failures))

    async def connect(self, address: tuple[str, int]) -> Connection:
        connection = self._connections.get(address)
        if connection is None:
            connection = await Connection.open(address, self._client_id, self._timeout)
            try:
                await connection.negotiate()
            except BaseException:
                await connection.close()
                raise
            self._connections[address] = connection
        return connection

    async def reconnect(self, connection: Connection) -> Connection:
        """A fresh connection to the same broker, in place of one that is closed or unusable (a
        broker closes the connection on an API key it does not know)."""
        await connection.close()
        if self._connections.get(connection.address) is connection:
            del self._connections[connection.address]
        if self._bootstrap_connection is connection:
            self._bootstrap_connection = None
        return await self.connect(connection.address)

    async def broker(self, broker: Broker) -> Connection:
        return await self.connect((broker.host, broker.port))

    async def close(self) -> None:
        for connection in self._connections.values():
            await connection.close()
        self._connections.clear()
        self._bootstrap_connection = None

    # -- routing --------------------------------------------------------------------------------
    async def metadata(self, topics: list[str] | None) -> ClusterMetadata:
        """Brokers, and partitions with their leaders for `topics` (None: every topic)."""
        connection = await self.bootstrap()
        version = connection.version(METADATA)
        request: dict[str, Any] = {
            "topics": None if topics is None else [{"name": t} for t in topics],
            "allow_auto_topic_creation": False,
        }
        response = await connection.request(METADATA, request, version)
        result = ClusterMetadata(
            brokers={int(b.node_id): Broker(int(b.node_id), b.host, int(b.port)) for b in response.brokers}
        )
        for topic in response.topics:
            if topic.name is None:
                continue
            if int(topic.error_code):
                result.topic_errors[topic.name] = int(topic.error_code)
                continue
            result.partitions[topic.name] = sorted(
                (PartitionInfo(topic.name, int(p.partition_index), int(p.leader_id), int(p.error_code))
                 for p in topic.partitions),
                key=lambda p: p.partition,
            )
        return result

    async def coordinator(self, group_id: str) -> Connection:
        """A connection to the coordinator of `group_id` (FindCoordinator, key type 0)."""
        connection = await self.bootstrap()
        version = connection.version(FIND_COORDINATOR)
        if version >= 4:
            response = await connection.request(
                FIND_COORDINATOR, {"key_type": 0, "coordinator_keys": [group_id]}, version)
            if not response.coordinators:
                raise AdminError(f"FindCoordinator returned no coordinator for group {group_id!r}")
            found = response.coordinators[0]
        else:
            found = await connection.request(FIND_COORDINATOR, {"key": group_id, "key_type": 0}, version)
        code = int(found.error_code)
        if code:
            message = f" ({found.error_message})" if getattr(found, "error_message", None) else ""
            raise AdminError(f"FindCoordinator for group {group_id!r} failed: {error_name(code)}{message}")
        return await self.connect((found.host, int(found.port)))
