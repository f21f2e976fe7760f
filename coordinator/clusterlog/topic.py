"""The log topic: created at first start with the shape the log needs, refused when it has another.

Shape (issue 27 point 1): as many partitions as `offsets.topic.num.partitions` (a group's partition
is its hash modulo that count, so the count can never change); `cleanup.policy=compact` exactly
(deletes write tombstones, so compaction keeps the topic bounded; `compact,delete` would drop live
groups with age), replication factor min(3, brokers) and `min.insync.replicas` min(2, replication
factor), so acks=all writes survive the loss of a broker where there are three. A topic that exists
with another partition count or policy is refused with one line: moving groups between partitions
or losing them to retention is never done silently (Kafka Connect refuses a non-compacted config
topic the same way).
"""

from __future__ import annotations

import asyncio
import time

from protocol.errors import ErrorCode

from .cluster import LogCluster, LogUnavailable, TopicLayout

CREATE_TOPICS, DESCRIBE_CONFIGS = 19, 32
TOPIC_RESOURCE = 2


class LogTopicError(Exception):
    """The log topic cannot be used as it is; the message is the one line an operator sees."""


def replication_for(brokers: int) -> tuple[int, int]:
    """(replication factor, min.insync.replicas) for a cluster of `brokers`."""
    factor = max(1, min(3, brokers))
    return factor, min(2, factor)


async def ensure_log_topic(cluster: LogCluster, name: str, partitions: int, timeout_s: float = 30.0) -> TopicLayout:
    """The log topic's layout once it exists with its shape and every partition has a leader."""
    layout = await cluster.describe(name)
    if layout is None:
        await _create(cluster, name, partitions)
    deadline = time.monotonic() + timeout_s
    while True:
        layout = await cluster.describe(name)
        if layout is not None and all(leader >= 0 for leader in layout.leaders.values()):
            break
        if time.monotonic() > deadline:
            raise LogUnavailable(f"the log topic {name} has no leader for every partition after {timeout_s:g}s")
        await asyncio.sleep(0.1)
    if layout.partitions != partitions:
        raise LogTopicError(
            f"the log topic {name} has {layout.partitions} partitions but offsets.topic.num.partitions is "
            f"{partitions}: groups would move between partitions; use another topic or the same count")
    policy = await _cleanup_policy(cluster, name)
    if policy != "compact":
        raise LogTopicError(f"the log topic {name} has cleanup.policy={policy}; it must be exactly 'compact' "
                            "(retention would delete live groups)")
    return layout


async def _create(cluster: LogCluster, name: str, partitions: int) -> None:
    factor, min_insync = replication_for(len(cluster.brokers))
    response = await cluster.call_any(CREATE_TOPICS, 7, {"timeout": 30_000, "validate_only": False, "topics": [{
        "name": name, "num_partitions": partitions, "replication_factor": factor, "assignments": [],
        "configs": [{"name": "cleanup.policy", "value": "compact"},
                    {"name": "min.insync.replicas", "value": str(min_insync)}],
    }]})
    for result in response.topics:
        code = int(result.error_code)
        if code in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):  # another instance won the race
            continue
        raise LogTopicError(f"cannot create the log topic {name}: {ErrorCode(code).name}"
                            + (f": {result.error_message}" if result.error_message else ""))


async def _cleanup_policy(cluster: LogCluster, name: str) -> str:
    response = await cluster.call_any(DESCRIBE_CONFIGS, 4, {"include_synonyms": False, "include_documentation": False,
                                                           "resources": [{"resource_type": TOPIC_RESOURCE,
                                                                          "resource_name": name,
                                                                          "configuration_keys": ["cleanup.policy"]}]})
    for result in response.results:
        if result.error_code:
            raise LogTopicError(f"cannot read the configuration of the log topic {name}: "
                                f"{ErrorCode(int(result.error_code)).name}")
        for config in result.configs:
            if config.name == "cleanup.policy":
                return str(config.value)
    raise LogTopicError(f"the log topic {name} reports no cleanup.policy")
