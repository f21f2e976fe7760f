"""Ownership of the log partitions through the upstream's group protocol, against Apache Kafka 4.0
(issue 27, point 2): instances divide the partitions balanced; a joining instance takes its share
without any other instance gaining one (sticky, cooperative); a leaving instance hands its share
over; no partition is ever served by two instances at once; a duplicate node id is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field

import pytest
import pytest_asyncio

from coordinator.clusterlog.cluster import LogCluster
from coordinator.clusterlog.membership import (
    Assignment,
    DuplicateNodeId,
    LogMembership,
    Metadata,
    leader_assignments,
)
from tests.support.kafka import KafkaBroker
from tests.support.polling import eventually

PARTITIONS = 12


@dataclass
class Ledger:
    """Who serves each partition, as the instances' listeners report it, and every moment two did."""

    holder: dict[int, str] = field(default_factory=dict)
    overlaps: list[str] = field(default_factory=list)


@dataclass
class Recorder:
    name: str
    ledger: Ledger
    gained: set[int] = field(default_factory=set)

    async def assigned(self, partitions: frozenset[int], owners: Mapping[int, int]) -> None:
        for p in partitions:
            if p in self.ledger.holder:
                self.ledger.overlaps.append(f"{self.name} got {p} while {self.ledger.holder[p]} serves it")
            self.ledger.holder[p] = self.name
        self.gained |= partitions

    async def revoked(self, partitions: frozenset[int]) -> None:
        await self._drop(partitions)

    async def lost(self, partitions: frozenset[int]) -> None:
        await self._drop(partitions)

    async def _drop(self, partitions: frozenset[int]) -> None:
        for p in partitions:
            if self.ledger.holder.get(p) == self.name:
                del self.ledger.holder[p]


class Instance:
    def __init__(self, broker: KafkaBroker, group: str, node_id: int, ledger: Ledger, name: str) -> None:
        self.cluster = LogCluster([("127.0.0.1", broker.port)], timeout_s=40.0)
        self.recorder = Recorder(name, ledger)
        self.membership = LogMembership(self.cluster, group, node_id, PARTITIONS, self.recorder,
                                        session_timeout_ms=10_000, heartbeat_interval_ms=200)
        self.task = asyncio.create_task(self.membership.run())

    async def stop(self) -> None:
        await self.membership.leave()
        with contextlib.suppress(asyncio.CancelledError, DuplicateNodeId):
            await asyncio.wait_for(self.task, 15)
        self.cluster.close()


@pytest_asyncio.fixture
async def started(kafka_broker: KafkaBroker) -> AsyncIterator[list[Instance]]:
    instances: list[Instance] = []
    yield instances
    for instance in instances:
        if not instance.task.done():
            await instance.stop()
        instance.cluster.close()


def settled(instances: list[Instance], ledger: Ledger) -> bool:
    sizes = sorted(len(i.membership.owned) for i in instances)
    return (set(ledger.holder) == set(range(PARTITIONS)) and sizes[-1] - sizes[0] <= 1
            and all(i.membership.stable.is_set() for i in instances))


def test_metadata_and_assignment_bytes_read_back() -> None:
    assert Metadata.decode(Metadata(7, 3, frozenset({1, 4})).encode()) == Metadata(7, 3, frozenset({1, 4}))
    assignment = Assignment(0, frozenset({2, 5}), {2: 7, 5: 7, 1: 8})
    assert Assignment.decode(assignment.encode()) == assignment


def test_listeners_travel_in_the_metadata_and_every_member_gets_every_node_s() -> None:
    endpoints = (("PLAINTEXT", "10.0.0.7", 9092), ("INTERNAL", "coordinator-1.svc", 19092))
    metadata = Metadata(7, 3, frozenset({1}), endpoints)
    assert Metadata.decode(metadata.encode()) == metadata
    result = leader_assignments({"a": metadata, "b": Metadata(8, 3, frozenset({0}), (("PLAINTEXT", "10.0.0.8", 9092),))}, 2)
    assert Assignment.decode(result["a"].encode()).nodes == {7: endpoints, 8: (("PLAINTEXT", "10.0.0.8", 9092),)}
    assert result["b"].nodes == result["a"].nodes


def test_a_version_0_metadata_and_assignment_still_read() -> None:
    old_metadata = struct.pack(">hiii", 0, 7, 3, 1) + struct.pack(">i", 4)
    assert Metadata.decode(old_metadata) == Metadata(7, 3, frozenset({4}))
    old_assignment = struct.pack(">hhi", 0, 0, 1) + struct.pack(">i", 2) + struct.pack(">iii", 1, 2, 7)
    assert Assignment.decode(old_assignment) == Assignment(0, frozenset({2}), {2: 7})


def test_the_leader_refuses_the_second_instance_of_a_node_id() -> None:
    result = leader_assignments({"a": Metadata(1, -1, frozenset()), "b": Metadata(1, -1, frozenset()),
                                 "c": Metadata(2, -1, frozenset())}, 4)
    assert result["b"].error != 0 and result["a"].error == result["c"].error == 0
    assert result["a"].partitions | result["c"].partitions == frozenset(range(4))


@pytest.mark.asyncio
async def test_instances_share_the_partitions_a_newcomer_takes_its_share_and_a_leaver_hands_over(
        kafka_broker: KafkaBroker, started: list[Instance]) -> None:
    group, ledger = f"coordinator-instances-{uuid.uuid4().hex[:8]}", Ledger()
    started += [Instance(kafka_broker, group, n, ledger, f"i{n}") for n in (1, 2, 3)]
    await eventually(lambda: settled(started, ledger), timeout=60, message="three instances settled")
    assert sorted(len(i.membership.owned) for i in started) == [4, 4, 4]
    before = {i.recorder.name: i.membership.owned for i in started}
    owners = started[0].membership.owners
    assert {p: f"i{n}" for p, n in owners.items()} == ledger.holder  # every instance knows every owner

    started.append(Instance(kafka_broker, group, 4, ledger, "i4"))
    await eventually(lambda: settled(started, ledger), timeout=60, message="four instances settled")
    assert sorted(len(i.membership.owned) for i in started) == [3, 3, 3, 3]
    for instance in started[:3]:  # sticky: the old instances only gave partitions away
        assert instance.membership.owned <= before[instance.recorder.name]

    leaver = started.pop(0)
    handed = leaver.membership.owned
    await leaver.stop()
    await eventually(lambda: settled(started, ledger), timeout=60, message="three instances settled again")
    assert sorted(len(i.membership.owned) for i in started) == [4, 4, 4]
    assert handed <= set().union(*(i.membership.owned for i in started))
    assert ledger.overlaps == []


@pytest.mark.asyncio
async def test_a_second_instance_with_the_same_node_id_is_refused_in_one_line(
        kafka_broker: KafkaBroker, started: list[Instance]) -> None:
    group, ledger = f"coordinator-instances-{uuid.uuid4().hex[:8]}", Ledger()
    started += [Instance(kafka_broker, group, 1, ledger, "first"), Instance(kafka_broker, group, 1, ledger, "second")]
    done, _ = await asyncio.wait([i.task for i in started], timeout=60, return_when=asyncio.FIRST_COMPLETED)
    assert len(done) == 1
    refused = done.pop().exception()
    assert isinstance(refused, DuplicateNodeId) and "node id 1 is already used" in str(refused)
    assert "\n" not in str(refused)
    survivor = next(i for i in started if not i.task.done())
    await eventually(lambda: len(survivor.membership.owned) == PARTITIONS, timeout=60,
                     message="the first instance owns every partition")
    assert ledger.overlaps == []
