"""A ShareFetch or ShareAcknowledge answered with one error code for partitions it will not serve:
the one shape of a refused partition (ShareFetch's rows also carry the acknowledgement's code and
no records), shared by the fetch APIs (topics not authorized), the forwarding (a holder away, a
topic refused where the client connected) and the unserved APIs (a node that cannot serve)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from protocol.errors import ErrorCode


def refused_partition(index: int, code: ErrorCode, leader: dict[str, int], acknowledge_only: bool) -> dict[str, Any]:
    """One partition's row: ``code`` for it (and for its acknowledgements, in a ShareFetch)."""
    row: dict[str, Any] = {"partition_index": index, "error_code": code, "error_message": None,
                           "current_leader": leader}
    if not acknowledge_only:
        row.update(acknowledge_error_code=code, acknowledge_error_message=None, records=b"", acquired_records=[])
    return row


def refused_answer(topics: Iterable[Any], code: ErrorCode, leader: dict[str, int],
                   endpoints: list[dict[str, Any]], acknowledge_only: bool) -> dict[str, Any]:
    """The whole answer's description: every partition of the request's ``topics`` refused with ``code``."""
    return {"throttle_time": 0, "error_code": ErrorCode.NONE, "error_message": None, "acquisition_lock_timeout": 0,
            "responses": [{"topic_id": topic.topic_id,
                           "partitions": [refused_partition(p.partition_index, code, leader, acknowledge_only)
                                          for p in topic.partitions]}
                          for topic in topics],
            "node_endpoints": endpoints}
