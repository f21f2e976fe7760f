"""The cluster log's settings: local by default, upstream only in sidecar mode, each refusal one line."""

from __future__ import annotations

import pytest

from coordinator.clusterlog.settings import ClusterLogConfig
from coordinator.config import ConfigError, resolve


def test_the_log_is_local_by_default() -> None:
    config = resolve(environ={}).build(ClusterLogConfig)
    assert (config.log_storage, config.upstream) == ("local", False)
    assert (config.log_topic, config.log_group_id) == ("__coordinator_log", "coordinator")


def test_upstream_storage_in_sidecar_mode_names_its_topic_and_group() -> None:
    config = resolve(environ={}, overrides=[
        "upstream.bootstrap.servers=127.0.0.1:9092", "coordinator.log.storage=UPSTREAM",
        "coordinator.log.topic=_group-log", "coordinator.log.group.id=fleet"]).build(ClusterLogConfig)
    assert (config.upstream, config.log_topic, config.log_group_id) == (True, "_group-log", "fleet")


def test_upstream_storage_without_an_upstream_is_refused() -> None:
    with pytest.raises(ConfigError) as error:
        resolve(environ={}, overrides=["coordinator.log.storage=upstream"])
    assert error.value.args[0] == "coordinator.log.storage" or "coordinator.log.storage" in str(error.value)
    assert "upstream.bootstrap.servers" in str(error.value)


@pytest.mark.parametrize("override", ["coordinator.log.storage=disk", "coordinator.log.topic= "])
def test_a_bad_value_is_refused(override: str) -> None:
    with pytest.raises(ConfigError) as error:
        resolve(environ={}, overrides=[override])
    assert override.split("=")[0] in str(error.value)
