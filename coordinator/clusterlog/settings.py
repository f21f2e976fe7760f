"""The cluster log's settings, declared once (`coordinator.settings`): `Config.build(ClusterLogConfig)`.

`coordinator.log.storage=upstream` keeps the coordinator's record log on the cluster the sidecar
fronts instead of the local data directory; it needs sidecar mode (`upstream.bootstrap.servers`),
which `config` checks with the other cross-setting rules.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..settings import at_least, setting

LOCAL, UPSTREAM = "local", "upstream"


def _storage(raw: str) -> str:
    value = raw.strip().lower()
    if value not in (LOCAL, UPSTREAM):
        raise ValueError(f"must be {LOCAL} or {UPSTREAM}")
    return value


def _name(raw: str) -> str:
    value = raw.strip()
    if not value:
        raise ValueError("must not be empty")
    return value


@dataclass(frozen=True, slots=True)
class ClusterLogConfig:
    log_storage: str = setting(
        "coordinator.log.storage", LOCAL,
        "Where the coordinator's record log lives: local (the data directory) or upstream (partitions of a "
        "compacted topic on the upstream cluster, sidecar mode only; instances share the partitions through "
        "a group on that cluster) (ours).", parse=_storage)
    log_topic: str = setting(
        "coordinator.log.topic", "__coordinator_log",
        "With coordinator.log.storage=upstream: the compacted topic holding the log, one partition per "
        "offsets.topic.num.partitions (created at first start) (ours).", parse=_name)
    log_group_id: str = setting(
        "coordinator.log.group.id", "coordinator",
        "With coordinator.log.storage=upstream: the upstream group the instances join to divide the log "
        "partitions; its transactional ids are <this>-log-<partition> (ours).", parse=_name)
    log_session_timeout_ms: int = setting(
        "coordinator.log.session.timeout.ms", 10000,
        "With coordinator.log.storage=upstream: session timeout of an instance in that group; an instance "
        "silent this long loses its partitions to the others (ours).", check=at_least(1000))
    log_transaction_timeout_ms: int = setting(
        "coordinator.log.transaction.timeout.ms", 60000,
        "With coordinator.log.storage=upstream: transaction.timeout.ms of the log partitions' writers (ours).",
        check=at_least(1000))
    log_write_timeout_ms: int = setting(
        "coordinator.log.write.timeout.ms", 30000,
        "With coordinator.log.storage=upstream: how long a write to the log keeps being retried while the "
        "cluster cannot be reached; then its requests are answered COORDINATOR_NOT_AVAILABLE (ours).",
        check=at_least(100))
    log_tail_interval_ms: int = setting(
        "coordinator.log.tail.interval.ms", 500,
        "With coordinator.log.storage=upstream: how often an instance reads what was written to every log "
        "partition, owned or not, so taking one over replays memory and reads only its tail; 0 disables "
        "(a takeover reads the partition from its start) (ours).", check=at_least(0))

    @property
    def upstream(self) -> bool:
        return self.log_storage == UPSTREAM
