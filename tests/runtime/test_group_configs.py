"""Per-group configs over a real socket: IncrementalAlterConfigs and DescribeConfigs on GROUP
resources (raw kio requests against the in-process server), Kafka's answers to bad input, the
override applied by each group type (a consumer's heartbeat interval, a share group's lock
duration and start offset, a streams group's standby tasks), and the override across a restart."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from confluent_kafka import Producer

from tests.runtime.conftest import serving
from tests.support.polling import eventually
from tests.support.wire import WireClient, request

DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 44
GROUP, TOPIC = 32, 2
SET, DELETE, APPEND = 0, 1, 2
INVALID_CONFIG, INVALID_REQUEST = 40, 42
DYNAMIC_GROUP_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 8, 4, 5


def alter(group: str, *configs: tuple[str, int, str | None], version: int = 1, validate_only: bool = False,
          resource_type: int = GROUP) -> Any:
    return request(INCREMENTAL_ALTER_CONFIGS, version, validate_only=validate_only, resources=[
        {"resource_type": resource_type, "resource_name": group,
         "configs": [{"name": n, "config_operation": op, "value": v} for n, op, v in configs]}])


def describe(*groups: str, keys: list[str] | None = None, version: int = 4, synonyms: bool = True) -> Any:
    return request(DESCRIBE_CONFIGS, version, include_synonyms=synonyms, include_documentation=False, resources=[
        {"resource_type": GROUP, "resource_name": g, "configuration_keys": keys} for g in groups])


async def altered(client: WireClient, group: str, *configs: tuple[str, int, str | None], **kw: Any) -> tuple[int, str | None]:
    (result,) = (await client.request(alter(group, *configs, **kw))).responses
    assert (result.resource_type, result.resource_name) == (kw.get("resource_type", GROUP), group)
    return result.error_code, result.error_message


async def configs_of(client: WireClient, group: str, version: int = 4) -> dict[str, Any]:
    (result,) = (await client.request(describe(group, version=version))).results
    assert result.error_code == 0
    return {c.name: c for c in result.configs}


@pytest.mark.asyncio
async def test_a_set_config_is_described_as_the_groups_and_a_delete_brings_back_the_brokers(tmp_path) -> None:
    async with serving(tmp_path, **{"group.consumer.session.timeout.ms": "50000"}) as server:
        client = await WireClient.connect(server.port)
        try:
            before = await configs_of(client, "g")
            assert set(before) == {
                "consumer.heartbeat.interval.ms", "consumer.session.timeout.ms", "share.auto.offset.reset",
                "share.delivery.count.limit", "share.heartbeat.interval.ms", "share.isolation.level",
                "share.record.lock.duration.ms", "share.session.timeout.ms", "streams.heartbeat.interval.ms",
                "streams.initial.rebalance.delay.ms", "streams.num.standby.replicas", "streams.session.timeout.ms"}
            hb = before["consumer.heartbeat.interval.ms"]
            assert (hb.value, hb.config_source, hb.config_type) == ("5000", DEFAULT_CONFIG, 3)
            assert [(s.name, s.value, s.source) for s in hb.synonyms] == [
                ("group.consumer.heartbeat.interval.ms", "5000", DEFAULT_CONFIG)]
            session = before["consumer.session.timeout.ms"]  # set in the server's configuration
            assert (session.value, session.config_source) == ("50000", STATIC_BROKER_CONFIG)

            assert await altered(client, "g", ("consumer.heartbeat.interval.ms", SET, "6000")) == (0, None)
            assert await altered(client, "g", ("share.auto.offset.reset", SET, "earliest"), version=0) == (0, None)
            after = await configs_of(client, "g")
            hb = after["consumer.heartbeat.interval.ms"]
            assert (hb.value, hb.config_source) == ("6000", DYNAMIC_GROUP_CONFIG)
            assert [(s.name, s.value, s.source) for s in hb.synonyms] == [
                ("consumer.heartbeat.interval.ms", "6000", DYNAMIC_GROUP_CONFIG),
                ("group.consumer.heartbeat.interval.ms", "5000", DEFAULT_CONFIG)]
            assert after["share.auto.offset.reset"].value == "earliest"
            assert (await configs_of(client, "other"))["consumer.heartbeat.interval.ms"].value == "5000"

            # configuration_keys narrows the answer; v1 has no config types but the same values.
            (narrow,) = (await client.request(describe("g", keys=["share.auto.offset.reset"]))).results
            assert [(c.name, c.value) for c in narrow.configs] == [("share.auto.offset.reset", "earliest")]
            assert (await configs_of(client, "g", version=1))["consumer.heartbeat.interval.ms"].value == "6000"

            assert await altered(client, "g", ("consumer.heartbeat.interval.ms", DELETE, None)) == (0, None)
            hb = (await configs_of(client, "g"))["consumer.heartbeat.interval.ms"]
            assert (hb.value, hb.config_source) == ("5000", DEFAULT_CONFIG)
        finally:
            await client.close()


@pytest.mark.asyncio
async def test_bad_changes_get_kafkas_errors_and_change_nothing(tmp_path) -> None:
    async with serving(tmp_path, **{"group.share.min.session.timeout.ms": "1000"}) as server:
        client = await WireClient.connect(server.port)
        try:
            cases = [
                (("no.such.config", SET, "1"), INVALID_CONFIG, "Unknown group config name: no.such.config"),
                (("consumer.heartbeat.interval.ms", SET, "100"), INVALID_CONFIG,
                 "consumer.heartbeat.interval.ms must be greater than or equal to group.consumer.min.heartbeat.interval.ms"),
                (("consumer.session.timeout.ms", SET, "90000"), INVALID_CONFIG,
                 "consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms"),
                (("consumer.session.timeout.ms", SET, "0"), INVALID_CONFIG,
                 "Invalid value 0 for configuration consumer.session.timeout.ms: Value must be at least 1"),
                (("share.delivery.count.limit", SET, "many"), INVALID_CONFIG,
                 "Invalid value many for configuration share.delivery.count.limit: Not a number of type INT"),
                (("share.record.lock.duration.ms", SET, "5000"), INVALID_CONFIG,
                 "share.record.lock.duration.ms must be greater than or equal to group.share.min.record.lock.duration.ms"),
                (("streams.num.standby.replicas", SET, "3"), INVALID_CONFIG,
                 "streams.num.standby.replicas must be less than or equal to group.streams.max.standby.replicas"),
                (("share.isolation.level", SET, "dirty"), INVALID_CONFIG,
                 "Invalid value dirty for configuration share.isolation.level: String must be one of: "
                 "read_committed, read_uncommitted"),
                (("consumer.session.timeout.ms", APPEND, "1"), INVALID_CONFIG,
                 "Can't APPEND to key consumer.session.timeout.ms because its type is not LIST."),
                (("consumer.session.timeout.ms", SET, None), INVALID_REQUEST,
                 "Null value not supported for : consumer.session.timeout.ms"),
            ]
            for config, code, message in cases:
                assert await altered(client, "g", config) == (code, message), config
            code, message = await altered(client, "g", ("share.auto.offset.reset", SET, "soonish"))
            assert code == INVALID_CONFIG
            assert message is not None and message.startswith(
                "Invalid value soonish for configuration share.auto.offset.reset: ")
            # Kafka's last check: the session timeout stays above the heartbeat interval.
            assert await altered(client, "g", ("share.session.timeout.ms", SET, "5000")) == (
                INVALID_CONFIG, "share.session.timeout.ms must be greater than share.heartbeat.interval.ms")
            assert await altered(client, "g", ("consumer.heartbeat.interval.ms", SET, "1"),
                                 ("consumer.heartbeat.interval.ms", SET, "2")) == (
                INVALID_REQUEST, "Error due to duplicate config keys")
            assert await altered(client, "", ("consumer.heartbeat.interval.ms", SET, "6000")) == (
                INVALID_REQUEST, "Default group resources are not allowed.")
            assert await altered(client, "t", ("retention.ms", SET, "1"), resource_type=TOPIC) == (
                INVALID_REQUEST, "Unsupported resource type: TOPIC")
            twice = await client.request(request(INCREMENTAL_ALTER_CONFIGS, 1, validate_only=False, resources=[
                {"resource_type": GROUP, "resource_name": "g", "configs": []}] * 2))
            assert [(r.error_code, r.error_message) for r in twice.responses] == [
                (INVALID_REQUEST, "Each resource must appear at most once.")] * 2
            # validate_only checks and writes nothing.
            assert await altered(client, "g", ("consumer.heartbeat.interval.ms", SET, "7000"), validate_only=True) == (0, None)
            (dc,) = (await client.request(request(DESCRIBE_CONFIGS, 4, include_synonyms=False, include_documentation=False,
                                                  resources=[{"resource_type": TOPIC, "resource_name": "t",
                                                              "configuration_keys": None}]))).results
            assert (dc.error_code, dc.error_message, dc.configs) == (INVALID_REQUEST, "Unsupported resource type: TOPIC", ())
            configs = await configs_of(client, "g")
            assert {c.config_source for c in configs.values()} == {DEFAULT_CONFIG}  # nothing above was written
        finally:
            await client.close()


# ---- applied: each group type reads its own values ----------------------------------------------------

CGH, SGH_SHARE, SHARE_FETCH, STREAMS = 68, 76, 78, 88


async def consumer_join(client: WireClient, group: str, member: str) -> Any:
    return await client.request(request(CGH, 1, group_id=group, member_id=member, member_epoch=0, instance_id=None,
                                        rack_id=None, rebalance_timeout=10_000, subscribed_topic_names=["t"],
                                        subscribed_topic_regex=None, server_assignor=None, topic_partitions=[]))


@pytest.mark.asyncio
async def test_a_consumer_groups_heartbeat_interval_is_its_own_and_survives_a_restart(tmp_path) -> None:
    async with serving(tmp_path, topics="t:2") as server:
        client = await WireClient.connect(server.port)
        try:
            assert await altered(client, "g", ("consumer.heartbeat.interval.ms", SET, "6000")) == (0, None)
            joined = await consumer_join(client, "g", "memberOfG0000000000001")
            assert (joined.error_code, joined.heartbeat_interval.total_seconds()) == (0, 6)
            other = await consumer_join(client, "h", "memberOfH0000000000001")
            assert other.heartbeat_interval.total_seconds() == 5  # the broker's, for a group without one
            # A change applies to the group's next heartbeat.
            assert await altered(client, "g", ("consumer.heartbeat.interval.ms", SET, "7000")) == (0, None)
            steady = await client.request(request(CGH, 1, group_id="g", member_id=joined.member_id,
                                                  member_epoch=joined.member_epoch, instance_id=None, rack_id=None,
                                                  rebalance_timeout=-1, subscribed_topic_names=None,
                                                  subscribed_topic_regex=None, server_assignor=None,
                                                  topic_partitions=None))
            assert (steady.error_code, steady.heartbeat_interval.total_seconds()) == (0, 7)
        finally:
            await client.close()
    # Restarted on the same data directory: the override was a record in the log.
    async with serving(tmp_path, topics="t:2") as server:
        client = await WireClient.connect(server.port)
        try:
            hb = (await configs_of(client, "g"))["consumer.heartbeat.interval.ms"]
            assert (hb.value, hb.config_source) == ("7000", DYNAMIC_GROUP_CONFIG)
            again = await consumer_join(client, "g", "memberOfG0000000000002")
            assert again.heartbeat_interval.total_seconds() == 7
        finally:
            await client.close()


def share_fetch(group: str, member: str, epoch: int, topic_id: Any, acks: list[dict[str, Any]] | None = None) -> Any:
    return request(SHARE_FETCH, 2, group_id=group, member_id=member, share_session_epoch=epoch, max_wait=0,
                   min_bytes=1, max_bytes=1 << 20, max_records=500, batch_size=500, forgotten_topics_data=[],
                   topics=[{"topic_id": topic_id, "partitions": [
                       {"partition_index": 0, "acknowledgement_batches": acks or []}]}])


def share_join(group: str, member: str) -> Any:
    return request(SGH_SHARE, 1, group_id=group, member_id=member, member_epoch=0, rack_id=None,
                   subscribed_topic_names=["t"])


@pytest.mark.asyncio
async def test_a_share_groups_lock_duration_start_and_heartbeat_are_its_own(tmp_path) -> None:
    async with serving(tmp_path, topics="t:1", **{"group.share.min.record.lock.duration.ms": "1000"}) as server:
        producer = Producer({"bootstrap.servers": f"127.0.0.1:{server.port}"})
        for i in range(3):
            producer.produce("t", f"r{i}".encode(), partition=0)
        assert await asyncio.to_thread(producer.flush, 10) == 0
        client = await WireClient.connect(server.port)
        try:
            assert await altered(client, "q", ("share.record.lock.duration.ms", SET, "2000"),
                                 ("share.auto.offset.reset", SET, "earliest"),
                                 ("share.heartbeat.interval.ms", SET, "6000")) == (0, None)
            first, second = "shareMemberQ000000000001", "shareMemberQ000000000002"
            joined = await client.request(share_join("q", first))
            assert (joined.error_code, joined.heartbeat_interval.total_seconds()) == (0, 6)
            topic_id = joined.assignment.topic_partitions[0].topic_id
            fetched = await client.request(share_fetch("q", first, 0, topic_id))
            assert fetched.acquisition_lock_timeout.total_seconds() == 2  # the group's, not the broker's 30 s
            # earliest (the group's) reads the records produced before the group existed; the
            # broker-wide latest would have started after them.
            acquired = [(a.first_offset, a.last_offset, a.delivery_count)
                        for r in fetched.responses for p in r.partitions for a in p.acquired_records]
            assert acquired == [(0, 2, 1)]
            held_at = time.monotonic()

            # The first member goes silent; a second one gets the records again once the lock ran out.
            other = await WireClient.connect(server.port)
            try:
                assert (await other.request(share_join("q", second))).error_code == 0
                epoch = 0

                async def redelivered() -> list[tuple[int, int, int]] | None:
                    nonlocal epoch
                    answer = await other.request(share_fetch("q", second, epoch, topic_id))
                    epoch += 1
                    got = [(a.first_offset, a.last_offset, a.delivery_count)
                           for r in answer.responses for p in r.partitions for a in p.acquired_records]
                    return got or None

                again = await eventually(redelivered, timeout=10.0)
                waited = time.monotonic() - held_at
            finally:
                await other.close()
            assert again == [(0, 2, 2)]
            assert 1.5 <= waited < 10  # the group's 2 s lock, not the broker's 30 s
        finally:
            await client.close()


STREAMS_TOPOLOGY = {"epoch": 0, "subtopologies": [{
    "subtopology_id": "0", "source_topics": ["words"], "source_topic_regex": [], "repartition_sink_topics": [],
    "state_changelog_topics": [{"name": "app-counts-changelog", "partitions": 0, "replication_factor": 0,
                                "topic_configs": []}],
    "repartition_source_topics": [], "copartition_groups": []}]}


class StreamsMember:
    """A raw streams member that reports back what it was told (as a client that owns its tasks)."""

    def __init__(self, client: WireClient, member_id: str) -> None:
        self.client, self.member_id, self.epoch = client, member_id, 0
        self.active: list[dict[str, Any]] = []
        self.standby: list[dict[str, Any]] = []

    async def heartbeat(self) -> Any:
        joining = self.epoch == 0
        response = await self.client.request(request(
            STREAMS, 0, group_id="app", member_id=self.member_id, member_epoch=self.epoch,
            endpoint_information_epoch=0, rebalance_timeout=30_000 if joining else -1,
            topology=STREAMS_TOPOLOGY if joining else None, active_tasks=self.active, standby_tasks=self.standby,
            warmup_tasks=[], process_id=f"p-{self.member_id}" if joining else None, user_endpoint=None,
            client_tags=None, task_offsets=None, task_end_offsets=None, shutdown_application=False))
        assert response.error_code == 0, response
        self.epoch = response.member_epoch
        if response.active_tasks is not None:
            self.active = [{"subtopology_id": t.subtopology_id, "partitions": list(t.partitions)}
                           for t in response.active_tasks]
            self.standby = [{"subtopology_id": t.subtopology_id, "partitions": list(t.partitions)}
                            for t in response.standby_tasks]
        return response

    def tasks(self, which: list[dict[str, Any]]) -> set[int]:
        return {p for t in which for p in t["partitions"]}


@pytest.mark.asyncio
async def test_a_streams_groups_standby_replicas_are_its_own_and_a_change_reassigns(tmp_path) -> None:
    async with serving(tmp_path, topics="words:4") as server:
        client = await WireClient.connect(server.port)
        try:
            members = [StreamsMember(client, "m1"), StreamsMember(client, "m2")]

            async def settled(standbys: int) -> bool:
                for member in members:
                    await member.heartbeat()
                actives = [m.tasks(m.active) for m in members]
                standby = [m.tasks(m.standby) for m in members]
                return (sorted(p for a in actives for p in a) == [0, 1, 2, 3]
                        and sorted(p for s in standby for p in s) == sorted([0, 1, 2, 3] * standbys)
                        and all(not (a & s) for a, s in zip(actives, standby, strict=True)))

            await eventually(lambda: settled(0), message="every task active once, no standby (the broker's 0)")
            # The group's own streams.num.standby.replicas: the live group is assigned again.
            assert await altered(client, "app", ("streams.num.standby.replicas", SET, "1")) == (0, None)
            await eventually(lambda: settled(1), message="each stateful task with one standby on the other member")
        finally:
            await client.close()
