"""Three sidecar instances sharing the log on an Apache Kafka 4.0 (`coordinator.log.storage=upstream`,
issue 27 points 4 and 6): each its own ports and data directory, the log partitions divided by the
instance group. When the instance coordinating a KIP-848 group is SIGKILLed, its partitions move to
the others and the group's members keep their ids, epochs and partitions, with no rebalance; offsets
committed before are fetched back from the new owner. When one is SIGSTOPped past its session
timeout, the others take its partitions (fencing its writers); resumed, it answers nothing for
them and rejoins.
"""

from __future__ import annotations

import asyncio
import json
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest
from kio.schema.offset_commit.v8.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kio.static.primitive import i8, i32, i64

from tests.clusterlog.test_upstream_storage import (
    LOG_PARTITIONS,
    commit_offsets,
    ensure_topic,
    fetch_offsets,
    upstream_instance,
)
from tests.durability.test_failover import (
    PARTITIONS,
    TOPIC,
    assert_members_kept_everything,
    consumers,
    settle,
)
from tests.sidecar.conftest import free_base_port
from tests.support.kafka import KafkaBroker
from tests.support.server import ServerProcess, free_port, wait_until
from tests.support.wire import WireClient

pytestmark = pytest.mark.interop

GROUP = "k848"


def owned(server: ServerProcess) -> frozenset[int]:
    """The partitions the instance's last instance-group assignment gave it (from its log)."""
    last: frozenset[int] = frozenset()
    for line in server.log().splitlines():
        if line.startswith("{") and '"instance_group_assignment"' in line:
            last = frozenset(json.loads(line)["owned"])
    return last


def divided(servers: list[ServerProcess]) -> bool:
    shares = [owned(s) for s in servers]
    return all(shares) and sum(len(s) for s in shares) == LOG_PARTITIONS \
        and frozenset().union(*shares) == frozenset(range(LOG_PARTITIONS))


async def _find(port: int, group: str) -> tuple[int, int, int]:
    client = await WireClient.connect(port)
    try:
        response = await client.request(FindCoordinatorRequest(key=group, key_type=i8(0)))
    finally:
        await client.close()
    return int(response.error_code), int(response.node_id), int(response.port)


def coordinator_of(servers: list[ServerProcess], group: str, asked: ServerProcess) -> ServerProcess | None:
    code, _, port = asyncio.run(_find(asked.port, group))
    return next((s for s in servers if s.port == port), None) if code == 0 else None


async def _commit(port: int, group: str, offsets: dict[int, int]) -> list[int]:
    client = await WireClient.connect(port)
    try:
        response = await client.request(OffsetCommitRequest(
            group_id=group, generation_id_or_member_epoch=i32(-1), member_id="", group_instance_id=None,
            topics=(OffsetCommitRequestTopic(name=TOPIC, partitions=tuple(
                OffsetCommitRequestPartition(partition_index=i32(p), committed_offset=i64(o),
                                             committed_leader_epoch=i32(-1), committed_metadata="")
                for p, o in offsets.items())),)))
    finally:
        await client.close()
    return [int(p.error_code) for t in response.topics for p in t.partitions]


@pytest.fixture
def instances(tmp_path: Path, kafka_broker: KafkaBroker) -> Iterator[list[ServerProcess]]:
    ensure_topic(kafka_broker, TOPIC, PARTITIONS)
    log_topic = f"coordinator-log-{uuid.uuid4().hex[:8]}"
    servers = [upstream_instance(tmp_path / f"i{n}", kafka_broker, log_topic, free_base_port(), free_port(),
                                 **{"sidecar.node.id": str(1000 + n)}) for n in (1, 2, 3)]
    try:
        for server in servers:
            server.start(wait=False)
        for server in servers:
            server.wait_ready(60)
        wait_until(lambda: divided(servers), timeout=60, message="the log partitions divided among three")
        yield servers
    finally:
        for server in servers:
            if server.proc is not None and server.proc.poll() is None:
                server.proc.send_signal(signal.SIGCONT)
            server.stop()


def test_a_sigkilled_instance_s_partitions_move_and_its_group_keeps_everything(
        instances: list[ServerProcess]) -> None:
    owner = coordinator_of(instances, GROUP, instances[0])
    assert owner is not None
    survivors = [s for s in instances if s is not owner]
    # A group of the same instance whose offsets alone are kept (GROUP's partition, by the hash).
    offsets_group = next(f"o{i}" for i in range(1000) if coordinator_of(instances, f"o{i}", owner) is owner)
    bootstrap = ",".join(s.bootstrap for s in instances)
    commit_offsets(bootstrap, offsets_group, {0: 5, 1: 6})
    members = consumers(bootstrap)
    try:
        before = settle(members, owner.port)
        assert owner.proc is not None
        owner.proc.kill()
        owner.proc.wait(10)
        wait_until(lambda: divided(survivors), timeout=60, message="the killed instance's partitions taken over")
        new_owner = coordinator_of(survivors, GROUP, survivors[0])
        assert new_owner is not None and new_owner is not owner
        assert_members_kept_everything(members, before, new_owner)
        assert fetch_offsets(",".join(s.bootstrap for s in survivors), offsets_group) == {0: 5, 1: 6}
    finally:
        for m in members:
            m.close()


@pytest.mark.slow
def test_a_paused_instance_is_fenced_answers_nothing_for_what_it_lost_and_rejoins(
        instances: list[ServerProcess]) -> None:
    paused = instances[0]
    group = next(f"g{i}" for i in range(1000) if coordinator_of(instances, f"g{i}", paused) is paused)
    assert asyncio.run(_commit(paused.port, group, {0: 1})) == [0]
    assert paused.proc is not None
    paused.proc.send_signal(signal.SIGSTOP)
    others = instances[1:]
    try:
        wait_until(lambda: divided(others), timeout=60, message="the paused instance's partitions taken over")
        taker = coordinator_of(others, group, others[0])
        assert taker is not None and taker is not paused
        assert asyncio.run(_commit(taker.port, group, {0: 2})) == [0]
    finally:
        paused.proc.send_signal(signal.SIGCONT)
    # Resumed: its lease has run out and its writers are fenced; it refuses the group at once.
    codes = asyncio.run(_commit(paused.port, group, {0: 3}))
    assert codes == [16], f"the resumed instance answered {codes} (NOT_COORDINATOR is 16)"
    wait_until(lambda: divided(instances), timeout=60, message="the resumed instance rejoined with a share")
    assert fetch_offsets(",".join(s.bootstrap for s in others), group) == {0: 2}
