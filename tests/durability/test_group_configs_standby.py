"""A group config set while a standby tails the log is the standby's once it takes over: the
record was replayed by the standby as it tailed, and the group's members get the group's value."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.support.server import ServerProcess, wait_until
from tests.support.wire import WireClient, request

TOPICS = {"topics": "t:2"}


async def ask(port: int, req: Any) -> Any:
    client = await WireClient.connect(port)
    try:
        return await client.request(req)
    finally:
        await client.close()


def test_a_group_config_set_while_a_standby_tails_is_served_after_its_takeover(tmp_path) -> None:
    data = tmp_path / "data"
    active = ServerProcess(data, overrides=TOPICS).start()
    standby = ServerProcess(data, overrides=TOPICS, port=active.port)
    standby.log_path = tmp_path / "standby.log"
    standby.start(wait=False)
    try:
        wait_until(lambda: "standby_waiting" in standby.log(), message="the standby to be tailing")
        altered = asyncio.run(ask(active.port, request(44, 1, validate_only=False, resources=[
            {"resource_type": 32, "resource_name": "g", "configs": [
                {"name": "consumer.heartbeat.interval.ms", "config_operation": 0, "value": "6000"}]}])))
        assert [r.error_code for r in altered.responses] == [0]
        active.kill()  # SIGKILL once the change was answered (so durable)
        wait_until(standby.ready, timeout=20, interval=0.01, message="standby takeover")

        described = asyncio.run(ask(standby.port, request(32, 4, include_synonyms=False, include_documentation=False,
                                                          resources=[{"resource_type": 32, "resource_name": "g",
                                                                      "configuration_keys": None}])))
        values = {c.name: (c.value, c.config_source) for c in described.results[0].configs}
        assert values["consumer.heartbeat.interval.ms"] == ("6000", 8)
        joined = asyncio.run(ask(standby.port, request(
            68, 1, group_id="g", member_id="memberAfterTakeover0001", member_epoch=0, instance_id=None, rack_id=None,
            rebalance_timeout=10_000, subscribed_topic_names=["t"], subscribed_topic_regex=None, server_assignor=None,
            topic_partitions=[])))
        assert (joined.error_code, joined.heartbeat_interval.total_seconds()) == (0, 6)
    finally:
        standby.stop()
        active.stop()
