"""Suite-wide test configuration: the one place Hypothesis profiles are defined, the one Apache
Kafka broker of a session (`kafka_broker`, started by the first test that needs it), and how the
suite is split between pytest-xdist workers (`./dev test` runs two, `--dist loadgroup`).

Workers get whole modules (a module's fixtures, servers and brokers start once), and every module
that uses the session broker goes to one worker, so a run starts one Kafka broker, not one per
worker. Without xdist (`-n 0`, or pytest run directly) the marks change nothing.

"ci" is deterministic (derandomized, no example database), prints a reproduction blob on failure and
tolerates slow examples; "dev" keeps Hypothesis' randomness. Neither has a deadline: run times of
I/O-heavy and assignor examples vary too much with machine load for a deadline to be honest. CI sets
the ``CI`` environment variable; ``HYPOTHESIS_PROFILE`` overrides the choice.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from tests.support.kafka import KafkaBroker, require_kafka_home

settings.register_profile(
    "ci", derandomize=True, database=None, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))


SESSION_BROKER_GROUP = "kafka-session-broker"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """One xdist group per module, except that the modules of the session broker share one."""
    with_broker = {item.module.__name__ for item in items
                   if isinstance(item, pytest.Function) and "kafka_broker" in item.fixturenames}
    for item in items:
        module = item.module.__name__ if isinstance(item, pytest.Function) else item.nodeid.split("::")[0]
        group = SESSION_BROKER_GROUP if module in with_broker else module
        item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """One Apache Kafka 4.0 broker for the whole session (a JVM start costs 5-10 s): tests that share
    it use topic and group names of their own. Skips with the reason without `KAFKA_HOME`."""
    broker = KafkaBroker(require_kafka_home(), tmp_path_factory.mktemp("kafka"), {"num.partitions": "3"})
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()
