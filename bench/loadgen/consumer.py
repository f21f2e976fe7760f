"""A KIP-848 model consumer: ConsumerGroupHeartbeat v1 only, as librdkafka and the Java client.

Behaviour (the parts of the real clients a coordinator can observe):
- join: epoch 0 with the subscription, the rebalance timeout, the server assignor and an empty
  owned-partitions list;
- steady: member id + epoch only, every other field null ("unchanged");
- an assignment in a response replaces the member's partitions at once (revocation and assignment
  take no time in the model) and the next heartbeat, sent immediately, acknowledges it by listing
  the owned partitions;
- FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID: drop everything and rejoin at epoch 0 with the same id;
- leave: epoch -1; a crash just stops heartbeating (the session timeout fences it).

Templates are cached per (epoch, kind) so a steady member re-uses the same bytes.
"""

from __future__ import annotations

import uuid
from typing import Any

from .wire import (
    CONSUMER_GROUP_HEARTBEAT,
    FENCED_MEMBER_EPOCH,
    UNKNOWN_MEMBER_ID,
    Template,
    cgh_v1_quick,
    decode_response,
    request,
)

ERROR_NAMES = {14: "COORDINATOR_LOAD_IN_PROGRESS", 15: "COORDINATOR_NOT_AVAILABLE", 16: "NOT_COORDINATOR",
               25: "UNKNOWN_MEMBER_ID", 110: "FENCED_MEMBER_EPOCH", 113: "STALE_MEMBER_EPOCH",
               22: "ILLEGAL_GENERATION", 27: "REBALANCE_IN_PROGRESS", 42: "INVALID_REQUEST"}

VERSION = 1


def error_name(code: int) -> str:
    return ERROR_NAMES.get(code, f"error_{code}")


class ConsumerMember:
    __slots__ = (
        "_steady",
        "acked",
        "assignor",
        "epoch",
        "group_id",
        "interval_ms",
        "joins",
        "left",
        "member_id",
        "owned",
        "rebalance_timeout_ms",
        "regex",
        "topics",
    )

    def __init__(self, group_id: str, member_id: str, topics: list[str], *, assignor: str | None = "uniform",
                 rebalance_timeout_ms: int = 60_000, regex: str | None = None) -> None:
        self.regex = regex  # librdkafka's mock wants "" next to topic names
        self.group_id = group_id
        self.member_id = member_id
        self.topics = topics
        self.assignor = assignor
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.epoch = 0
        self.owned: dict[uuid.UUID, frozenset[int]] = {}
        self.acked = True
        self.interval_ms = 5000
        self.joins = 0
        self.left = False
        self._steady: tuple[int, Template] | None = None

    # -- requests -------------------------------------------------------------------------------
    def template(self) -> Template:
        if self.left:
            return self._encode({"member_epoch": -1})
        if self.epoch == 0:
            return self._encode({
                "member_epoch": 0, "rebalance_timeout": self.rebalance_timeout_ms,
                "subscribed_topic_names": self.topics, "server_assignor": self.assignor,
                "subscribed_topic_regex": self.regex,
                "topic_partitions": [],
            })
        if not self.acked:
            return self._encode({"member_epoch": self.epoch, "topic_partitions": self.owned_wire()})
        steady = self._steady
        if steady is None or steady[0] != self.epoch:
            steady = self._steady = (self.epoch, self._encode({"member_epoch": self.epoch, "topic_partitions": None}))
        return steady[1]

    def owned_wire(self) -> list[dict[str, Any]]:
        return [{"topic_id": t, "partitions": sorted(p)} for t, p in self.owned.items()]

    def _encode(self, fields: dict[str, Any]) -> Template:
        return request(CONSUMER_GROUP_HEARTBEAT, VERSION, {
            "group_id": self.group_id, "member_id": self.member_id, "rebalance_timeout": -1,
            "instance_id": None, "rack_id": None, "subscribed_topic_names": None,
            "subscribed_topic_regex": None, "server_assignor": None, **fields,
        })

    # -- responses ------------------------------------------------------------------------------
    def on_response(self, payload: bytes) -> int:
        """Apply a response; returns its error code. After it, `wants_heartbeat_now` says whether
        the client would heartbeat at once (to acknowledge a new assignment)."""
        error, epoch, interval_ms, has_assignment = cgh_v1_quick(payload)
        if error:
            if error in (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID):
                self.epoch = 0
                self.owned = {}
                self.acked = True
            return int(error)
        if self.epoch == 0:
            self.joins += 1
        was_ack = not self.acked
        self.epoch = epoch
        if interval_ms > 0:
            self.interval_ms = interval_ms
        if has_assignment:
            body = decode_response(CONSUMER_GROUP_HEARTBEAT, VERSION, payload)
            self.owned = {tp.topic_id: frozenset(tp.partitions) for tp in body.assignment.topic_partitions
                          if tp.partitions}
            self.acked = False
        elif was_ack:
            self.acked = True
        return 0

    @property
    def wants_heartbeat_now(self) -> bool:
        return not self.acked

    def partition_count(self) -> int:
        return sum(len(p) for p in self.owned.values())
