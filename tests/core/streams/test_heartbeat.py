"""StreamsGroupHeartbeat as one pure step: members join, scale out with warm-ups and leave through
heartbeats alone; every step's records replay to the live group; bad requests change nothing."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

import msgspec
import pytest

from coordinator.core.errors import CoordinatorError, ErrorCode
from coordinator.core.streams import records as r
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

    def __init__(self, member_id: str, api_version: int = 1, restore_per_heartbeat: int = 400) -> None:
        self.member_id, self.api_version = member_id, api_version
        self.restore_per_heartbeat = restore_per_heartbeat
        self.epoch = 0
        self.active: frozenset[Task] = frozenset()
        self.standby: frozenset[Task] = frozenset()
        self.warmup: frozenset[Task] = frozenset()
        self.restored: dict[Task, int] = {}

    def request(self) -> StreamsHeartbeat:
        joining = self.epoch == 0
        offsets = end_offsets = None
        if self.api_version >= 1:  # v1: report the changelog offsets of warm-ups as they restore
            for task in self.warmup:
                self.restored[task] = min(self.END, self.restored.get(task, 0) + self.restore_per_heartbeat)
            offsets = tuple((s, p, o) for (s, p), o in sorted(self.restored.items()) if (s, p) in self.warmup)
            end_offsets = tuple((s, p, self.END) for s, p in sorted(self.warmup))
        return StreamsHeartbeat(
            "app", self.member_id, self.epoch, rebalance_timeout_ms=300000 if joining else -1,
            topology=TOPOLOGY if joining else None, active_tasks=self.active, standby_tasks=self.standby,
            warmup_tasks=self.warmup, process_id=f"p-{self.member_id}" if joining else None,
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


def test_two_v0_members_join_and_split_the_tasks_at_once() -> None:
    coordinator, a, b = Coordinator(), Client("a", api_version=0), Client("b", api_version=0)
    first = coordinator.beat(a)
    assert first["member_epoch"] == 1 and len(tasks_of(first["active_tasks"])) == 6
    assert first["status"] == [] and "acceptable_recovery_lag" not in first
    coordinator.rounds([a, b])
    assert coordinator.group is not None and coordinator.group.state_name == "Stable"
    assert len(a.active) == len(b.active) == 3 and not a.active & b.active


def test_a_scale_out_warms_up_then_hands_over() -> None:
    coordinator, a, b = Coordinator(), Client("a"), Client("b")
    coordinator.rounds([a, b], 10)  # b warmed up and took over its share
    assert len(a.active) == len(b.active) == 3
    before = {"a": a.active, "b": b.active}
    c = Client("c", restore_per_heartbeat=0)  # restores nothing yet
    coordinator.rounds([a, b, c])
    assert coordinator.group is not None
    target = coordinator.group.targets
    assert len(target["c"].active) == 2
    assert c.warmup == target["c"].active and not c.active  # warming up, nothing moved yet
    assert {"a": a.active, "b": b.active} == before  # every task still processed where its state is
    c.restore_per_heartbeat = 400
    coordinator.rounds([a, b, c], 10)
    assert c.active == target["c"].active and not c.warmup
    assert a.active == target["a"].active and b.active == target["b"].active


def test_a_v0_newcomer_gets_its_tasks_at_once() -> None:
    coordinator, a, b = Coordinator(), Client("a"), Client("b", api_version=0)
    assert coordinator.beat(a)["acceptable_recovery_lag"] == 100
    coordinator.rounds([a, b])
    assert len(b.active) == 3 and not b.warmup


def test_a_leave_fences_the_member_and_bumps_the_group() -> None:
    coordinator, a, b = Coordinator(), Client("a"), Client("b")
    coordinator.rounds([a, b], 10)
    assert coordinator.group is not None
    epoch = coordinator.group.group_epoch
    b.epoch = -1
    assert coordinator.beat(b)["member_epoch"] == -1
    assert set(coordinator.group.members) == {"a"} and coordinator.group.group_epoch == epoch + 1
    coordinator.rounds([a])
    assert len(a.active) == 6


def test_missing_internal_topics_keep_the_group_not_ready_with_empty_assignments() -> None:
    coordinator, a = Coordinator(), Client("a")
    coordinator.group, step = heartbeat(None, coordinator.soft, a.request(), {"words": 6}, metadata_hash, SETTINGS,
                                        "a", "/127.0.0.1", 1)
    assert coordinator.group.state_name == "NotReady"
    assert step.response["status"] == [{"status_code": 3, "status_detail": "Internal topics are missing: "
                                                                           "app-counts-changelog"}]
    assert [t.name for t in step.internal_topics] == ["app-counts-changelog"]
    assert step.response["active_tasks"] == []


@pytest.mark.parametrize(("change", "code"), [
    ({"member_epoch": 3}, ErrorCode.FENCED_MEMBER_EPOCH),
    ({"member_id": "stranger", "member_epoch": 1}, ErrorCode.UNKNOWN_MEMBER_ID),
    ({"group_id": "other", "member_epoch": 1}, ErrorCode.GROUP_ID_NOT_FOUND),
    ({"instance_id": "i-1"}, ErrorCode.INVALID_REQUEST),
    ({"task_offsets": (("0", 1, 5), ("0", 1, 6))}, ErrorCode.INVALID_REQUEST),
    ({"active_tasks": frozenset({("0", 9)})}, ErrorCode.INVALID_REQUEST),
    ({"member_epoch": 0, "member_id": "d", "rebalance_timeout_ms": 1, "process_id": "p",
      "topology": r.StreamsGroupTopologyValue(0, TOPOLOGY.subtopologies * 1 + (r.Subtopology(
          "1", source_topics=("words",)),))}, ErrorCode.INVALID_REQUEST),
])
def test_a_refused_heartbeat_writes_nothing(change: dict[str, Any], code: ErrorCode) -> None:
    coordinator, a = Coordinator(), Client("a")
    coordinator.rounds([a], 2)
    group = coordinator.group
    assert group is not None
    members, epoch = dict(group.members), group.group_epoch
    request = msgspec.structs.replace(a.request(), **change)
    with pytest.raises(CoordinatorError) as refused:
        heartbeat(None if change.get("group_id") else group, coordinator.soft, request, TOPICS, metadata_hash,
                  SETTINGS, "a", "/127.0.0.1", 10_000)
    assert refused.value.code == code
    assert group.members == members and group.group_epoch == epoch
