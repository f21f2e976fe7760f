"""Share groups through three sidecar instances sharing the log on an Apache Kafka 4.0
(`coordinator.log.storage=upstream`): the instances share the broker's listener (SO_REUSEPORT), so a
share consumer's ShareFetch lands on any of them, and the two that do not hold the group forward it
to the one that does (`coordinator/share/forward.py`). confluent-kafka's and the Java share consumers
share a 2-partition topic, every record delivered and acknowledged once; with the holder SIGKILLed, the
group moves: nothing acknowledged comes back, and what a consumer held unacknowledged does.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.clusterlog.instance_support import coordinator_of, three_instances
from tests.interop import test_share_java
from tests.interop.share_support import Delivery, all_records, consume_until, share_consumer
from tests.interop.test_share_java import java_readers_get_each_record_once
from tests.share.test_forward import share_among
from tests.support.clients import produce
from tests.support.kafka import KafkaBroker
from tests.support.server import ServerProcess, wait_until

pytestmark = pytest.mark.interop

share_reader = test_share_java.share_reader  # the fixture: the Java share consumer, compiled once
PARTITIONS = 2
SHARE = {"share.auto.offset.reset": "earliest", "group.share.heartbeat.interval.ms": "500",
         "group.share.session.timeout.ms": "6000"}


def make_topic(kafka: KafkaBroker) -> str:
    topic = f"shared-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])[topic].result(30)
    return topic


def holder_of(servers: list[ServerProcess], group: str) -> ServerProcess:
    """The instance holding ``group`` (FindCoordinator asked of every instance until one answers)."""
    found: list[ServerProcess] = []

    def asked() -> bool:
        for server in servers:
            holder = coordinator_of(servers, group, server)
            if holder is not None:
                found.append(holder)
                return True
        return False

    wait_until(asked, timeout=30, message=f"a holder of {group}")
    return found[-1]


@pytest.fixture(scope="module")
def instances(kafka_broker: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[ServerProcess]]:
    with three_instances(tmp_path_factory.mktemp("share-instances"), kafka_broker, **SHARE) as servers:
        yield servers


def test_share_consumers_through_three_instances_get_every_record_once(
        instances: list[ServerProcess], kafka_broker: KafkaBroker) -> None:
    topic = make_topic(kafka_broker)
    count = 1_000
    produce(kafka_broker.bootstrap, topic, count, PARTITIONS)
    group = f"queue-{uuid.uuid4().hex[:6]}"
    holder = holder_of(instances, group)
    elsewhere = next(s for s in instances if s is not holder)  # bootstrapped at an instance not holding it
    seen = share_among(elsewhere.bootstrap, topic, group, 3, count)
    everything = [d for got in seen for d in got]
    assert len(everything) == count and set(everything) == all_records(count)  # none twice, none missing


def test_java_share_consumers_through_three_instances_get_every_record_once(
        instances: list[ServerProcess], kafka_broker: KafkaBroker, share_reader: str) -> None:
    topic = make_topic(kafka_broker)
    count = 1_000
    produce(kafka_broker.bootstrap, topic, count, PARTITIONS)
    group = f"java-{uuid.uuid4().hex[:6]}"
    holder = holder_of(instances, group)
    elsewhere = next(s for s in instances if s is not holder)
    asyncio.run(java_readers_get_each_record_once(share_reader, elsewhere.bootstrap, group, topic, all_records(count)))


@pytest.mark.slow
def test_the_holder_sigkilled_the_group_moves_acknowledged_records_stay_and_held_ones_come_back(
        tmp_path: Path, kafka_broker: KafkaBroker) -> None:
    with three_instances(tmp_path, kafka_broker, **SHARE) as servers:
        topic = make_topic(kafka_broker)
        group = f"moving-{uuid.uuid4().hex[:6]}"
        holder = holder_of(servers, group)
        others = [s for s in servers if s is not holder]
        produce(kafka_broker.bootstrap, topic, 200, PARTITIONS)
        before = [d for got in share_among(others[0].bootstrap, topic, group, 2, 200) for d in got]
        assert sorted(before) == sorted(all_records(200))  # each acknowledged (commit_sync answered) once

        produce(kafka_broker.bootstrap, topic, 100, PARTITIONS)
        later = {(p, o + 100) for p, o in all_records(100)}
        keeper = share_consumer(others[0].bootstrap, topic, group, **{"share.acknowledgement.mode": "explicit"})
        held: list[Delivery] = []
        consume_until(keeper, lambda: bool(held), held, 30)  # acquired, never acknowledged
        assert held and set(held) <= later

        holder.kill()
        new_holder = holder_of(others, group)
        assert new_holder in others
        keeper.close()  # its records are not acknowledged: they must come back, whoever releases them

        after = [d for got in share_among(others[1].bootstrap, topic, group, 2, 100, timeout=90) for d in got]
        assert not set(after) & set(before), "an acknowledged record came back"
        assert set(after) == later  # every later record, those the keeper held among them
