"""Per-group configs over a real socket: IncrementalAlterConfigs and DescribeConfigs on GROUP
resources (raw kio requests against the in-process server), Kafka's answers to bad input, the
override applied by each group type (a consumer's heartbeat interval, a share group's lock
duration and start offset, a streams group's standby tasks), and the override across a restart."""

from __future__ import annotations

from typing import Any

import pytest

from tests.runtime.conftest import serving
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

            assert await altered(client, "g", ("consumer.heartbeat.interval.ms", SET, "6000"),
                                 ("share.auto.offset.reset", SET, "earliest")) == (0, None)
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
