"""A streams group driven by heartbeats alone, for the tests: ``Client`` behaves as the Java client
(joins with its topology, reports the tasks of its last response and, on v1, the offsets of the
warm-ups it restores), ``Coordinator`` serves ``heartbeat`` and checks after every step that the
records replay to the live group and that no task is active on two members."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

from coordinator.core.streams import records as r
from coordinator.core.streams.describe import session_expired
from coordinator.core.streams.group import StreamsGroupState
from coordinator.core.streams.heartbeat import SoftState, StreamsSettings, heartbeat
from coordinator.core.streams.heartbeat_request import StreamsHeartbeat
from coordinator.core.streams.tasks import Task

TOPOLOGY = r.StreamsGroupTopologyValue(0, (r.Subtopology(
    "0", source_topics=("words",),
    state_changelog_topics=(r.TopicInfo("app-counts-changelog", topic_configs=(
        r.TopicConfig("cleanup.policy", "compact"),)),)),))
TOPICS = {"words": 6, "app-counts-changelog": 6}
SETTINGS = StreamsSettings(num_warmup_replicas=2, acceptable_recovery_lag=100)


def metadata_hash(names: Iterable[str]) -> int:
    digest = hashlib.blake2b(digest_size=8)
    for name in sorted(names):
        digest.update(f"{name}:{TOPICS.get(name)}".encode())
    return int.from_bytes(digest.digest(), "big", signed=True)


def tasks_of(lists: list[dict[str, Any]] | None) -> frozenset[Task]:
    return frozenset((t["subtopology_id"], p) for t in lists or () for p in t["partitions"])


class Client:
    """A Streams member as the Java client behaves: joins with its topology, reports the tasks of
    the last response, and (v1) its task offsets."""

    END = 1000

    def __init__(self, member_id: str, api_version: int = 1, restore_per_heartbeat: int = 400,
                 only_changes: bool = False, instance_id: str | None = None, process_id: str | None = None) -> None:
        self.member_id, self.api_version = member_id, api_version
        self.instance_id = instance_id
        self.process_id = process_id or f"p-{member_id}"
        self.restore_per_heartbeat = restore_per_heartbeat
        self.only_changes = only_changes
        """Send the offset maps only when they changed (the trunk client between intervals)."""
        self.sent: tuple[object, object] | None = None
        self.epoch = 0
        self.active: frozenset[Task] = frozenset()
        self.standby: frozenset[Task] = frozenset()
        self.warmup: frozenset[Task] = frozenset()
        self.restored: dict[Task, int] = {}
        self.end = self.END
        """The end offset it reports for its warm-ups (the trunk client reports Long.MAX_VALUE over an
        empty changelog, whose end it does not know)."""

    def request(self) -> StreamsHeartbeat:
        joining = self.epoch == 0
        offsets = end_offsets = None
        if self.api_version >= 1:  # v1: report the changelog offsets of warm-ups as they restore
            for task in self.warmup:
                self.restored[task] = min(self.end, self.restored.get(task, 0) + self.restore_per_heartbeat)
            offsets = tuple((s, p, o) for (s, p), o in sorted(self.restored.items()) if (s, p) in self.warmup)
            end_offsets = tuple((s, p, self.end) for s, p in sorted(self.warmup))
            if self.only_changes and self.sent == (offsets, end_offsets):
                offsets = end_offsets = None
            else:
                self.sent = (offsets, end_offsets)
        return StreamsHeartbeat(
            "app", self.member_id, self.epoch, instance_id=self.instance_id,
            rebalance_timeout_ms=300000 if joining else -1,
            topology=TOPOLOGY if joining else None, active_tasks=self.active, standby_tasks=self.standby,
            warmup_tasks=self.warmup, process_id=self.process_id if joining else None,
            task_offsets=offsets, task_end_offsets=end_offsets, api_version=self.api_version)

    def take(self, response: dict[str, Any]) -> None:
        self.epoch = response["member_epoch"]
        if response.get("active_tasks") is not None:
            self.active = tasks_of(response["active_tasks"])
            self.standby = tasks_of(response["standby_tasks"])
            self.warmup = tasks_of(response["warmup_tasks"])


class Coordinator:
    def __init__(self) -> None:
        self.group: StreamsGroupState | None = None
        self.soft = SoftState()
        self.log: list[r.StreamsRecord] = []
        self.now = 0

    def beat(self, client: Client) -> dict[str, Any]:
        self.now += 100
        self.group, step = heartbeat(self.group, self.soft, client.request(), TOPICS, metadata_hash, SETTINGS,
                                     client.member_id, "/127.0.0.1", self.now)
        self.log.extend(step.records)
        client.take(step.response)
        replayed = StreamsGroupState("app")
        for record in self.log:
            replayed.replay(r.decode_record(*r.encode_record(record)))
        assert replayed.members == self.group.members and replayed.group_epoch == self.group.group_epoch
        running: dict[Task, str] = {}
        for m in self.group.members.values():
            for task in [*m.assigned.active, *m.pending_revocation.active]:
                assert running.setdefault(task, m.member_id) == m.member_id
        return step.response

    def rounds(self, clients: list[Client], n: int = 4) -> None:
        for _ in range(n):
            for client in clients:
                self.beat(client)

    def expire(self, member_id: str) -> None:
        """The member's session timed out (the records go to the log like any step's)."""
        assert self.group is not None
        step = session_expired(self.group, self.soft, member_id)
        if step is not None:
            self.log.extend(step.records)
