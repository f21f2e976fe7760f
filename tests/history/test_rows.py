"""Events → rows: every domain event maps onto the schema, new event kinds need no code, and the
partition tracker turns ownership changes into revoked/assigned rows with partition lists."""

from __future__ import annotations

import dataclasses
import importlib
import io
import struct
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import pytest
from kio.serial import entity_writer

from coordinator.core import events
from coordinator.history.assignments import decode_assignment
from coordinator.history.rows import EVENT_ROWS, Partitions, PartitionTracker, event_row, rows_of
from coordinator.history.schema import FIELDS, FIELDS_BY_NAME, KINDS

EVENT_CLASSES = [c for c in vars(events).values() if isinstance(c, type) and dataclasses.is_dataclass(c)]
PY_TYPES = {"int32": int, "int64": int, "float64": (int, float), "string": str, "topic_partitions": list}


def sample(cls: type) -> object:
    hints = typing.get_type_hints(cls)
    values = {}
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        values[f.name] = 3 if hint is int else "consumer" if f.name == "group_type" else f"{f.name}-x"
    return cls(**values)


def test_every_event_class_has_a_table_entry() -> None:
    assert set(EVENT_CLASSES) == set(EVENT_ROWS), "add new events to EVENT_ROWS (or SKIP them)"


@pytest.mark.parametrize("cls", EVENT_CLASSES, ids=lambda c: c.__name__)
def test_every_event_row_fits_the_schema(cls: type) -> None:
    row = event_row(sample(cls))
    if EVENT_ROWS[cls] is None:
        assert row is None
        return
    assert row is not None
    assert row["kind"] in KINDS
    for name, value in row.items():
        assert name in FIELDS_BY_NAME, f"{cls.__name__}: column {name} is not in the schema"
        assert isinstance(value, PY_TYPES[FIELDS_BY_NAME[name].type]), f"{cls.__name__}.{name}={value!r}"
    assert {f.name for f in FIELDS if f.required} - set(row) <= {"v", "ts_ms", "seq", "node_id", "cluster_id"}


def test_consumer_rebalance_start_is_an_epoch_bump_to_the_new_epoch() -> None:
    row = event_row(events.RebalanceStarted("g", "consumer", 4, "member m joined"))
    assert row == {"kind": "group_epoch_bumped", "group_id": "g", "group_type": "consumer", "group_epoch": 5,
                   "reason": "member m joined"}
    classic = event_row(events.RebalanceStarted("g", "classic", 4, "r"))
    assert classic is not None and classic["kind"] == "rebalance_started" and classic["generation_id"] == 4


def test_assignor_duration_is_reported_in_ms() -> None:
    row = event_row(events.TargetAssignmentComputed("g", 7, "uniform", 3, 12, 2_500_000))
    assert row is not None and row["duration_ms"] == 2.5 and "duration_ns" not in row


def test_a_row_is_labelled_with_the_group_type_its_event_carries() -> None:
    # Today's producers (the defaults) ...
    assert (event_row(events.MemberFenced("g", "m", "session-timeout", 3)) or {})["group_type"] == "consumer"
    assert (event_row(events.RebalanceCompleted("g", 2, 10, 1)) or {})["group_type"] == "classic"
    # ... and another type reusing the events: labelled with its own name, not as a consumer group.
    for event in (events.MemberFenced("g", "m", "session-timeout", 3, group_type="streams"),
                  events.MemberAssignmentChanged("g", "m", 4, 1, 0, group_type="streams"),
                  events.TargetAssignmentComputed("g", 7, "sticky", 3, 12, 0, group_type="streams"),
                  events.RebalanceCompleted("g", 2, 10, 1, group_type="streams")):
        row = event_row(event)
        assert row is not None and row["group_type"] == "streams", row


def test_an_event_class_without_a_table_entry_still_becomes_a_row() -> None:
    @dataclass(frozen=True, slots=True)
    class MemberReconciled:  # what a future core event could look like
        group_id: str
        member_id: str
        member_epoch: int
        rack: str

    row = event_row(MemberReconciled("g", "m", 9, "r1"))
    assert row == {"kind": "member_reconciled", "group_id": "g", "member_id": "m", "member_epoch": 9,
                   "detail": '{"rack":"r1"}'}


def P(**topics: list[int]) -> dict[str, frozenset[int]]:
    return {t: frozenset(p) for t, p in topics.items()}


class FakeSource:
    def __init__(self) -> None:
        self.protocol: dict[str, str] = {}
        self.classic: dict[str, dict[str, tuple[str | None, Partitions]]] = {}
        self.consumer: dict[tuple[str, str], tuple[str | None, Partitions]] = {}

    def classic_is_eager(self, group_id: str) -> bool:
        return "cooperative" not in self.protocol.get(group_id, "range")

    def classic_assignments(self, group_id: str) -> Mapping[str, tuple[str | None, Partitions]]:
        return self.classic.get(group_id, {})

    def consumer_member(self, group_id: str, member_id: str) -> tuple[str | None, Partitions] | None:
        return self.consumer.get((group_id, member_id))

    def snapshot(self) -> Iterator[tuple[str, str, str | None, Partitions]]:
        for gid, members in self.classic.items():
            for mid, (instance, parts) in members.items():
                yield gid, mid, instance, parts


def derived(tracker: PartitionTracker, event: object) -> list[tuple[str, str, dict[str, list[int]]]]:
    return [(r["kind"], r["member_id"], {tp["topic"]: tp["partitions"] for tp in r["partitions"]})
            for r in rows_of(event, tracker) if r["kind"].startswith("partitions_")]


def test_eager_classic_group_revokes_everything_at_rebalance_start() -> None:
    source = FakeSource()
    tracker = PartitionTracker(source)
    source.classic["g"] = {"a": (None, P(t=[0, 1])), "b": ("inst-b", P(t=[2, 3]))}
    assert derived(tracker, events.RebalanceCompleted("g", 1, 10, 2)) == [
        ("partitions_assigned", "a", {"t": [0, 1]}), ("partitions_assigned", "b", {"t": [2, 3]})]
    assert derived(tracker, events.MemberLeft("g", "a", "leave-group")) == [("partitions_revoked", "a", {"t": [0, 1]})]
    rows = list(rows_of(events.RebalanceStarted("g", "classic", 1, "members left"), tracker))
    assert [(r["kind"], r.get("reason")) for r in rows] == [
        ("rebalance_started", "members left"), ("partitions_revoked", "eager-rebalance")]
    assert rows[1]["group_instance_id"] == "inst-b" and rows[1]["partition_count"] == 2
    source.classic["g"] = {"b": ("inst-b", P(t=[0, 1, 2, 3]))}
    assert derived(tracker, events.RebalanceCompleted("g", 2, 10, 1)) == [
        ("partitions_assigned", "b", {"t": [0, 1, 2, 3]})]


def test_cooperative_classic_group_revokes_only_what_moves() -> None:
    source = FakeSource()
    source.protocol["g"] = "cooperative-sticky"
    tracker = PartitionTracker(source)
    source.classic["g"] = {"a": (None, P(t=[0, 1, 2, 3]))}
    derived(tracker, events.RebalanceCompleted("g", 1, 10, 1))
    assert derived(tracker, events.RebalanceStarted("g", "classic", 1, "b joined")) == []
    source.classic["g"] = {"a": (None, P(t=[0, 1])), "b": (None, {})}
    assert derived(tracker, events.RebalanceCompleted("g", 2, 10, 2)) == [("partitions_revoked", "a", {"t": [2, 3]})]
    source.classic["g"] = {"a": (None, P(t=[0, 1])), "b": (None, P(t=[2, 3]))}
    assert derived(tracker, events.RebalanceCompleted("g", 3, 10, 2)) == [("partitions_assigned", "b", {"t": [2, 3]})]


def test_consumer_member_changes_become_partition_rows_and_a_fence_releases_the_rest() -> None:
    source = FakeSource()
    tracker = PartitionTracker(source)
    source.consumer[("g", "a")] = (None, P(t=[0, 1, 2], u=[0]))
    assert derived(tracker, events.MemberAssignmentChanged("g", "a", 1, 4, 0)) == [
        ("partitions_assigned", "a", {"t": [0, 1, 2], "u": [0]})]
    source.consumer[("g", "a")] = (None, P(t=[0], u=[0]))
    rows = list(rows_of(events.MemberAssignmentChanged("g", "a", 1, 0, 2), tracker))
    assert [r["kind"] for r in rows] == ["member_assignment_changed", "partitions_revoked"]
    assert rows[1]["member_epoch"] == 1 and rows[1]["partitions"] == [{"topic": "t", "partitions": [1, 2]}]
    fenced = derived(tracker, events.MemberLeft("g", "a", "session-timeout", group_type="consumer"))
    assert fenced == [("partitions_revoked", "a", {"t": [0], "u": [0]})]
    assert tracker.owned == {}


def test_a_replaced_static_member_keeps_its_partitions_under_the_new_id() -> None:
    source = FakeSource()
    source.classic["g"] = {"old": ("i", P(t=[0]))}
    tracker = PartitionTracker(source)
    tracker.seed()
    assert derived(tracker, events.StaticMemberReplaced("g", "i", "old", "new")) == []
    assert derived(tracker, events.MemberLeft("g", "new", "session-timeout")) == [("partitions_revoked", "new", {"t": [0]})]


def encoded_assignment(version: int, partitions: dict[str, list[int]]) -> bytes:
    module = importlib.import_module(f"kio.schema.consumer_protocol_assignment.v{min(version, 3)}.data")
    value = module.ConsumerProtocolAssignment(
        assigned_partitions=tuple(module.TopicPartition(topic=t, partitions=tuple(ps)) for t, ps in partitions.items()),
        user_data=b"ud",
    )
    buffer = io.BytesIO()
    buffer.write(struct.pack(">h", version))
    entity_writer(type(value))(buffer, value)
    return buffer.getvalue()


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_classic_assignments_decode_like_kio_encodes_them(version: int) -> None:
    data = encoded_assignment(version, {"b": [2, 0], "a": [1]})
    assert decode_assignment(data) == P(a=[1], b=[0, 2])
    assert decode_assignment(b"") == {}
    with pytest.raises(ValueError):
        decode_assignment(data[:9])
