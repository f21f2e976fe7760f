"""Kafka's `group-coordinator-metrics`, under the JMX exporter's names, from a real server process:
scraped over HTTP after a classic and a KIP-848 confluent-kafka member joined, and after a restart
that replays the log."""

from __future__ import annotations

import math

import pytest

from tests.support.clients import make_member, poll_until, produce
from tests.support.metrics import scrape
from tests.support.server import ServerProcess, wait_until

pytestmark = pytest.mark.interop

P = "kafka_server_group_coordinator_metrics_"


def test_group_coordinator_metrics_follow_real_client_activity(tmp_path) -> None:
    server = ServerProcess(tmp_path / "data", overrides={"topics": "orders:2"})
    server.start()
    try:
        first = scrape(server.metrics_port)
        # Loaded once: the start-up replay's time is there, and the one shard is active.
        assert first[P + "partition_load_time_max"] >= first[P + "partition_load_time_avg"] >= 0
        assert first[P + 'num_partitions{state="active"}'] == 1
        assert first[P + 'num_partitions{state="loading"}'] == 0
        consumer_before = first[P + "consumer_group_rebalance_count"]
        classic_before = first[P + "group_completed_rebalance_count"]

        produce(server.bootstrap, "orders", 10, 2)
        classic = make_member(server.bootstrap, "km-classic", "km-classic-1", ["orders"])
        poll_until([classic], lambda: len(classic.consumed) == 10, message="classic member consumed")
        modern = make_member(server.bootstrap, "km-consumer", "km-consumer-1", ["orders"],
                             **{"group.protocol": "consumer"})
        poll_until([modern], lambda: len(modern.consumed) == 10, message="KIP-848 member consumed")

        after = scrape(server.metrics_port)
        # A KIP-848 member joining bumps its group's epoch: Kafka's consumer-group rebalance sensor.
        assert after[P + "consumer_group_rebalance_count"] > consumer_before
        assert after[P + "consumer_group_rebalance_rate"] > 0
        # The classic member's join completed a rebalance.
        assert after[P + "group_completed_rebalance_count"] > classic_before
        assert after[P + "group_completed_rebalance_rate"] > 0
        assert after[P + 'group_count{protocol="classic"}'] >= 1
        assert after[P + 'group_count{protocol="consumer"}'] >= 1
        # Events went through the shard: processing and queue times are real numbers, ordered.
        for name in ("event_processing_time_ms", "event_queue_time_ms"):
            p50, p99, top = (after[f"{P}{name}_{s}"] for s in ("p50", "p99", "max"))
            assert not math.isnan(top), name
            assert 0 <= p50 <= p99 <= top, name
        assert after[P + "event_processing_time_ms_max"] > 0
        assert after[P + "event_queue_size"] >= 0
        classic.close()
        modern.close()
    finally:
        server.stop()

    # A restart replays the log written above: a load time again, and the counts start afresh.
    server.start()
    try:
        wait_until(lambda: scrape(server.metrics_port)[P + 'num_partitions{state="active"}'] == 1,
                   message="shard active after restart")
        again = scrape(server.metrics_port)
        assert again[P + "partition_load_time_max"] >= 0
        assert again[P + 'group_count{protocol="classic"}'] >= 1  # state came back from the log
    finally:
        server.stop()
