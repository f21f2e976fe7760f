"""Per-group configs in the core: a change is a GroupConfig record holding the group's whole set of
overrides (a tombstone once none is left), replay (and so a restart or a standby) rebuilds the same
values, a refused or validate-only change writes nothing, the configs outlive their group as in
Kafka, and a consumer group's session timer is armed with its own session timeout."""

from __future__ import annotations

from coordinator.core.consumer.context import session_timer_key
from coordinator.core.errors import ErrorCode
from coordinator.core.group_configs import (
    DELETE,
    SET,
    AlterGroupConfigs,
    DescribeGroupConfigs,
    GroupConfigChange,
    GroupConfigEntry,
    GroupConfigKey,
    GroupConfigValue,
)
from tests.core.consumer.harness import ConsumerHarness
from tests.core.harness import Harness


def alter(h: Harness, group_id: str, *operations: tuple[str, int, str | None], validate_only: bool = False
          ) -> tuple[int, str | None]:
    ref = h.next_ref()
    h.send(AlterGroupConfigs(ref, (GroupConfigChange(group_id, operations),), validate_only))
    (outcome,) = h.reply(ref).results
    return outcome.error_code, outcome.error_message


def described(h: Harness, group_id: str) -> dict[str, tuple[str, int]]:
    ref = h.next_ref()
    h.send(DescribeGroupConfigs(ref, (group_id,)))
    ((_, rows),) = h.reply(ref).groups
    return {row.name: (row.value, row.source) for row in rows}


def test_a_change_is_one_record_of_the_whole_set_and_replay_rebuilds_it() -> None:
    h = Harness()
    assert alter(h, "g", ("consumer.heartbeat.interval.ms", SET, "6000")) == (0, None)
    assert alter(h, "g", ("share.delivery.count.limit", SET, "3")) == (0, None)
    assert h.records[-1].key == GroupConfigKey("g")
    assert h.records[-1].value == GroupConfigValue((GroupConfigEntry("consumer.heartbeat.interval.ms", "6000"),
                                                    GroupConfigEntry("share.delivery.count.limit", "3")))
    assert h.shard.group_configs.of("g").share_delivery_count_limit == 3
    h.restart()  # a new shard from the log (the harness also compares every step's replay)
    settings = h.shard.group_configs.of("g")
    assert (settings.consumer_heartbeat_interval_ms, settings.share_delivery_count_limit) == (6000, 3)
    assert described(h, "g")["share.delivery.count.limit"] == ("3", 8)
    assert h.shard.group_configs.of("other") is h.shard.group_configs.defaults

    count = len(h.records)
    assert alter(h, "g", ("consumer.heartbeat.interval.ms", SET, "6000")) == (0, None)
    assert len(h.records) == count  # nothing changed: nothing written
    assert alter(h, "g", ("consumer.heartbeat.interval.ms", DELETE, None),
                 ("share.delivery.count.limit", DELETE, None)) == (0, None)
    assert h.records[-1].key == GroupConfigKey("g") and h.records[-1].value is None  # the last one gone: tombstone
    h.restart()
    assert h.shard.group_configs.overrides == {}


def test_refused_and_validate_only_changes_write_nothing() -> None:
    h = Harness()
    assert alter(h, "g", ("consumer.heartbeat.interval.ms", SET, "6000"),
                 ("nope", SET, "1"))[0] == ErrorCode.INVALID_CONFIG  # one bad config refuses the resource
    assert alter(h, "g", ("share.delivery.count.limit", SET, "3"), validate_only=True) == (0, None)
    assert not [r for r in h.records if isinstance(r.key, GroupConfigKey)]
    assert h.shard.group_configs.overrides == {}


def test_configs_outlive_their_group_as_in_kafka() -> None:
    h = Harness()
    assert alter(h, "g", ("consumer.session.timeout.ms", SET, "50000")) == (0, None)
    h.join_new("g")  # a classic group comes and goes
    h.delete_groups("g")
    assert h.shard.group_configs.of("g").consumer_session_timeout_ms == 50_000


def test_a_consumer_members_session_timer_uses_the_groups_session_timeout() -> None:
    h = ConsumerHarness({"t": 2})
    assert alter(h, "g", ("consumer.session.timeout.ms", SET, "50000")) == (0, None)
    joined = h.cgh("m1", 0, names=["t"], rebalance_timeout_ms=10_000, owned={})
    assert joined.error_code == 0
    assert h.timers[session_timer_key("g", joined.member_id)] == h.now + 50_000
    other = h.cgh("m2", 0, "h", names=["t"], rebalance_timeout_ms=10_000, owned={})
    assert h.timers[session_timer_key("h", other.member_id)] == h.now + 45_000  # the broker's
