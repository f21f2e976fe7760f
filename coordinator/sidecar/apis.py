"""The API surface of sidecar mode: which keys are served here, the ApiVersions table and transaction
coordinator lookups.

ApiVersions (KIP-511) in sidecar mode:
- the group APIs (and ApiVersions, FindCoordinator) are ours: our ranges, whatever the upstream has,
  so a client gets KIP-848 groups in front of a cluster that has none;
- every other key the upstream advertises is forwarded: the upstream's range, intersected with the
  versions we can decode for the responses we rewrite (Metadata, DescribeCluster, Produce, Fetch);
- TxnOffsetCommit is served here and forwarded upstream (`txn_offsets`), so it is advertised with
  the versions both we and the upstream speak (`UPSTREAM_CAPPED`), and not at all before the
  upstream's are known or when the upstream has none: a client then sees a cluster without
  transactional offset commits rather than one whose commits would fail; so are DescribeConfigs and
  IncrementalAlterConfigs, whose GROUP resources are answered here and the rest upstream
  (`group_configs`);
- the share-group and streams-group APIs (KIP-932, KIP-1071) are never forwarded: an upstream's
  own are not advertised. The streams groups' two are ours like the other group APIs, whatever the
  upstream has (Kafka 4.0 has none): the sidecar creates their internal topics upstream
  (`internal_topics`). The share groups' four (ShareGroupHeartbeat, ShareGroupDescribe, ShareFetch,
  ShareAcknowledge) are served here over the upstream (`share/wiring`), with our ranges, when the
  node registers them (one shard, the log local).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING, Any

from protocol.build import build
from protocol.errors import ErrorCode
from protocol.schemas import request_schema, response_schema

from ..logging import get_logger
from .wire import ForwardError

if TYPE_CHECKING:
    from .sidecar import Sidecar

log = get_logger("coordinator.sidecar.apis")

TXN_OFFSET_COMMIT = 28
FIND_COORDINATOR = 10
METADATA = 3
NOT_ADVERTISED = frozenset({76, 77, 78, 79, 80, 81, 90, 91})
SHARE_GROUPS = frozenset({76, 77, 78, 79})
"""Never forwarded, but advertised when served here (the upstream's are not)."""
DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 44
UPSTREAM_CAPPED = frozenset({TXN_OFFSET_COMMIT, DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS})
"""Served here but done upstream: advertised only within the upstream's range."""
DECODED = (0, 1, 3, 60)  # responses we may rewrite: versions limited to the ones we can decode


@cache
def decodable(api_key: int) -> tuple[int, int] | None:
    """The contiguous range of versions we have schemas for. Loading them imports a module per
    version, so `warm()` runs this at start-up rather than on a client's first ApiVersions."""
    versions: list[int] = []
    for version in range(0, 32):
        try:
            request_schema(api_key, version)
            response_schema(api_key, version)
        except Exception:
            if versions:
                break
            continue
        versions.append(version)
    return (min(versions), max(versions)) if versions else None


def warm() -> None:
    for api_key in (*DECODED, TXN_OFFSET_COMMIT):
        decodable(api_key)


def api_table(ours: Mapping[int, tuple[int, int]], upstream: Mapping[int, tuple[int, int]]
              ) -> dict[int, tuple[int, int]]:
    table: dict[int, tuple[int, int]] = {}
    for key, (low, high) in upstream.items():
        if key in ours or key in NOT_ADVERTISED:
            continue
        if key in DECODED:
            known = decodable(key)
            if known is None:
                continue
            low, high = max(low, known[0]), min(high, known[1])
            if low > high:
                continue
        table[key] = (low, high)
    for key, span in ours.items():
        if key in NOT_ADVERTISED and key not in SHARE_GROUPS:
            continue
        if key in UPSTREAM_CAPPED:
            theirs = upstream.get(key)
            if theirs is None or max(span[0], theirs[0]) > min(span[1], theirs[1]):
                continue
            span = (max(span[0], theirs[0]), min(span[1], theirs[1]))
        table[key] = span
    return dict(sorted(table.items()))


def provisional_table(ours: Mapping[int, tuple[int, int]]) -> dict[int, tuple[int, int]]:
    """ApiVersions before the upstream has ever answered: what this process answers itself, which
    is its own APIs and Metadata (`unreachable.Fallback`). Nothing forwarded is advertised, since
    nothing is known of what the upstream serves; the broker listeners a client would send data
    requests to open only once the upstream has answered, and a client asks ApiVersions again on
    each of them."""
    table = {key: span for key, span in ours.items()
             if (key not in NOT_ADVERTISED or key in SHARE_GROUPS) and key not in UPSTREAM_CAPPED}
    known = decodable(METADATA)
    if known is not None:
        table[METADATA] = known
    return dict(sorted(table.items()))


def txn_offset_commit_versions() -> tuple[int, int]:
    """The TxnOffsetCommit versions we decode (the handler's range; ApiVersions caps it upstream)."""
    return decodable(TXN_OFFSET_COMMIT) or (0, 0)


async def locate_transaction_coordinators(sidecar: Sidecar, keys: list[tuple[str, int]]) -> list[dict[str, Any]]:
    """Ask the upstream where each (key, key type) is coordinated; answer with our listener for
    that broker. Failures are COORDINATOR_NOT_AVAILABLE (clients retry FindCoordinator)."""
    cluster = sidecar.cluster
    out: list[dict[str, Any]] = []
    for key, key_type in keys:
        entry: dict[str, Any] = {"key": key, "node_id": -1, "host": "", "port": -1,
                                 "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE, "error_message": None}
        version = cluster.version_for(FIND_COORDINATOR, 3, 1)
        if not cluster.reachable:
            entry["error_message"] = "The upstream cluster cannot be reached."
            out.append(entry)
            continue
        if version is None:
            entry["error_message"] = "The upstream cluster does not serve FindCoordinator for this key type."
            out.append(entry)
            continue
        try:
            response, _ = await cluster.client.call_any(
                FIND_COORDINATOR, build(request_schema(FIND_COORDINATOR, version), {"key": key, "key_type": key_type}))
        except ForwardError as exc:
            entry["error_message"] = f"upstream unavailable: {exc}"
            out.append(entry)
            continue
        if response.error_code:
            entry.update(error_code=int(response.error_code), error_message=response.error_message)
        else:
            host, port = sidecar.listeners.address(int(response.node_id))
            sidecar.listeners.update({int(response.node_id)})
            entry.update(node_id=int(response.node_id), host=host, port=port, error_code=0)
        out.append(entry)
    return out
