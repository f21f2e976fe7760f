"""Topology validation and internal topics, as Kafka's InternalTopicManager decides them."""

from __future__ import annotations

import pytest

from coordinator.core.errors import CoordinatorError, ErrorCode
from coordinator.core.streams.records import (
    CopartitionGroup,
    StreamsGroupTopologyValue,
    Subtopology,
    TopicConfig,
    TopicInfo,
)
from coordinator.core.streams.tasks import TasksTuple
from coordinator.core.streams.topology import (
    InternalTopic,
    Status,
    all_tasks,
    check_owned_tasks,
    check_request_topology,
    check_topology_update,
    configure,
)

COMPACT = (TopicConfig("cleanup.policy", "compact"),)


def counting_app(changelog_rf: int = 0) -> StreamsGroupTopologyValue:
    """Source "words" -> repartition by key -> count into a store (Kafka Streams' word count)."""
    return StreamsGroupTopologyValue(0, (
        Subtopology("0", source_topics=("words",), repartition_sink_topics=("app-by-key-repartition",)),
        Subtopology("1", repartition_source_topics=(TopicInfo("app-by-key-repartition", topic_configs=(
                        TopicConfig("cleanup.policy", "delete"),)),),
                    state_changelog_topics=(TopicInfo("app-counts-changelog", 0, changelog_rf, COMPACT),)),
    ))


def test_internal_topics_get_the_source_count_and_the_clients_configs_and_the_group_waits_for_them() -> None:
    configured = configure(counting_app(), {"words": 6})
    assert configured.status == Status.MISSING_INTERNAL_TOPICS and not configured.is_ready
    assert configured.status_detail == "Internal topics are missing: app-by-key-repartition, app-counts-changelog"
    assert configured.internal_topics_to_create == (
        InternalTopic("app-by-key-repartition", 6, -1, (("cleanup.policy", "delete"),)),
        InternalTopic("app-counts-changelog", 6, -1, (("cleanup.policy", "compact"),)),
    )
    ready = configure(counting_app(), {"words": 6, "app-by-key-repartition": 6, "app-counts-changelog": 6})
    assert ready.is_ready and ready.internal_topics_to_create == ()
    assert ready.task_counts() == {"0": 6, "1": 6}
    assert ready.subtopologies is not None and ready.subtopologies["1"].stateful
    assert not ready.subtopologies["0"].stateful
    assert all_tasks(ready)[:2] == [("0", 0), ("0", 1)] and len(all_tasks(ready)) == 12


def test_a_replication_factor_the_topology_names_is_kept() -> None:
    configured = configure(counting_app(changelog_rf=3), {"words": 2})
    assert [t.replication_factor for t in configured.internal_topics_to_create] == [-1, 3]


def test_missing_source_topics_are_a_status_summarised_as_kafka_does() -> None:
    topology = StreamsGroupTopologyValue(0, (Subtopology("0", source_topics=("d", "b", "a", "c")),))
    configured = configure(topology, {})
    assert configured.status == Status.MISSING_SOURCE_TOPICS and configured.subtopologies is None
    assert configured.status_detail == "Source topics a, b, c and 1 additional topics are missing."


def test_repartition_counts_propagate_through_a_chain_of_subtopologies() -> None:
    topology = StreamsGroupTopologyValue(0, (
        Subtopology("2", repartition_source_topics=(TopicInfo("r2"),)),
        Subtopology("1", repartition_source_topics=(TopicInfo("r1"),), source_topics=("small",),
                    repartition_sink_topics=("r2",)),
        Subtopology("0", source_topics=("in",), repartition_sink_topics=("r1",)),
    ))
    configured = configure(topology, {"in": 8, "small": 3})
    assert {t.name: t.partitions for t in configured.internal_topics_to_create} == {"r1": 8, "r2": 8}


def test_a_fixed_repartition_count_is_kept() -> None:
    topology = StreamsGroupTopologyValue(0, (
        Subtopology("0", source_topics=("in",), repartition_sink_topics=("r",)),
        Subtopology("1", repartition_source_topics=(TopicInfo("r", 2),)),
    ))
    assert configure(topology, {"in": 8}).internal_topics_to_create[0].partitions == 2


@pytest.mark.parametrize(("subtopologies", "message"), [
    ((Subtopology("0", repartition_source_topics=(TopicInfo("a"),), repartition_sink_topics=("b",)),
      Subtopology("1", repartition_source_topics=(TopicInfo("b"),), repartition_sink_topics=("a",))),
     "There may be loops in the topology"),
    ((Subtopology("0", source_topics=("in",)), Subtopology("1", repartition_source_topics=(TopicInfo("orphan"),))),
     "a repartition source topic is never used as a sink topic"),
])
def test_unresolvable_repartition_counts_are_an_invalid_topology(subtopologies: tuple[Subtopology, ...],
                                                                  message: str) -> None:
    with pytest.raises(CoordinatorError) as refused:
        configure(StreamsGroupTopologyValue(0, subtopologies), {"in": 1})
    assert refused.value.code == ErrorCode.STREAMS_INVALID_TOPOLOGY
    assert message in str(refused.value.message)


def join(left: str, right: str, *, right_repartition: TopicInfo | None = None) -> StreamsGroupTopologyValue:
    if right_repartition is None:
        return StreamsGroupTopologyValue(0, (Subtopology(
            "0", source_topics=(left, right), copartition_groups=(CopartitionGroup(source_topics=(0, 1)),)),))
    return StreamsGroupTopologyValue(0, (
        Subtopology("0", source_topics=("wide",), repartition_sink_topics=(right_repartition.name,)),
        Subtopology("1", source_topics=(left,), repartition_source_topics=(right_repartition,),
                    copartition_groups=(CopartitionGroup(source_topics=(0,), repartition_source_topics=(0,)),)),
    ))


def test_copartitioned_source_topics_must_have_the_same_count() -> None:
    configured = configure(join("left", "right"), {"left": 3, "right": 5})
    assert configured.status == Status.INCORRECTLY_PARTITIONED_TOPICS
    assert configured.status_detail == "Following topics do not have the same number of partitions: [{left=3, right=5}]"
    assert configure(join("left", "right"), {"left": 4, "right": 4}).is_ready


def test_a_copartitioned_repartition_topic_takes_the_count_of_the_external_topic() -> None:
    configured = configure(join("left", "x", right_repartition=TopicInfo("rep")), {"left": 3, "wide": 9})
    created = {t.name: t.partitions for t in configured.internal_topics_to_create}
    assert created == {"rep": 3}  # not the 9 of the subtopology that writes it


def test_a_fixed_repartition_topic_that_disagrees_with_its_copartitioned_source_is_incorrectly_partitioned() -> None:
    configured = configure(join("left", "x", right_repartition=TopicInfo("rep", 5)), {"left": 3, "wide": 9})
    assert configured.status == Status.INCORRECTLY_PARTITIONED_TOPICS
    assert configured.status_detail == ("Number of partitions [5] of repartition topic [rep] doesn't match number "
                                        "of partitions [3] of the source topic.")


def test_an_existing_internal_topic_with_another_count_is_incorrectly_partitioned_not_recreated() -> None:
    configured = configure(counting_app(), {"words": 6, "app-by-key-repartition": 6, "app-counts-changelog": 2})
    assert configured.status == Status.INCORRECTLY_PARTITIONED_TOPICS
    assert configured.status_detail == ("Existing topic app-counts-changelog has different number of partitions: "
                                        "expected 6, found 2")
    assert configured.internal_topics_to_create == ()


@pytest.mark.parametrize(("subtopology", "code", "message"), [
    (Subtopology("0", source_topics=("__consumer_offsets", "in")), ErrorCode.STREAMS_INVALID_TOPOLOGY,
     "Use of Kafka internal topics __consumer_offsets in a Kafka Streams topology is prohibited."),
    (Subtopology("0", source_topics=("bad name", "in")), ErrorCode.STREAMS_INVALID_TOPOLOGY,
     "Topic names bad name are not valid topic names."),
    (Subtopology("0", source_topics=("x" * 250,)), ErrorCode.STREAMS_INVALID_TOPOLOGY, "are not valid topic names."),
    (Subtopology("0", source_topic_regex=("in.*",)), ErrorCode.INVALID_REQUEST,
     "Regular expressions for source topics are not supported yet."),
    (Subtopology("0", source_topics=("in",), state_changelog_topics=(TopicInfo("c", 3),)),
     ErrorCode.STREAMS_INVALID_TOPOLOGY,
     "Changelog topic c must have an undefined partition count, but it is set to 3."),
    (Subtopology("0", source_topics=("in",), copartition_groups=(CopartitionGroup(source_topics=(1,)),)),
     ErrorCode.STREAMS_INVALID_TOPOLOGY, "refers to a topic it does not have"),
    (Subtopology("0"), ErrorCode.STREAMS_INVALID_TOPOLOGY, "No source topics found for subtopology 0"),
])
def test_a_joining_members_topology_is_checked_before_the_group_sees_it(subtopology: Subtopology, code: ErrorCode,
                                                                        message: str) -> None:
    with pytest.raises(CoordinatorError) as refused:
        check_request_topology(StreamsGroupTopologyValue(0, (subtopology,)))
    assert refused.value.code == code and message in str(refused.value.message)


def test_repeated_subtopology_ids_are_refused() -> None:
    twice = StreamsGroupTopologyValue(0, (Subtopology("0", source_topics=("a",)), Subtopology("0", source_topics=("b",))))
    with pytest.raises(CoordinatorError, match="defined more than once"):
        check_request_topology(twice)
    check_request_topology(counting_app())


def test_a_topology_is_stored_once_and_never_changed_under_a_live_group() -> None:
    v1 = counting_app()
    assert check_topology_update(None, v1)
    assert not check_topology_update(v1, v1)
    newer = StreamsGroupTopologyValue(1, v1.subtopologies)
    assert not check_topology_update(newer, v1)  # the member is behind: STALE_TOPOLOGY, group keeps its own
    changed = StreamsGroupTopologyValue(0, v1.subtopologies[:1])
    with pytest.raises(CoordinatorError) as refused:
        check_topology_update(v1, changed)
    assert refused.value.code == ErrorCode.INVALID_REQUEST
    assert refused.value.message == "Topology updates are not supported yet."


def test_a_member_may_report_only_tasks_the_topology_has() -> None:
    ready = configure(counting_app(), {"words": 2, "app-by-key-repartition": 2, "app-counts-changelog": 2})
    check_owned_tasks(ready, TasksTuple(frozenset({("0", 1)}), frozenset({("1", 0)})))
    with pytest.raises(CoordinatorError) as unknown:
        check_owned_tasks(ready, TasksTuple(frozenset({("7", 0)})))
    assert unknown.value.message == "Subtopology 7 does not exist in the topology."
    with pytest.raises(CoordinatorError) as beyond:
        check_owned_tasks(ready, TasksTuple(warmup=frozenset({("1", 2)})))
    assert beyond.value.message == "Task 2 for subtopology 1 is invalid. Number of tasks for this subtopology: 2"
    assert beyond.value.code == ErrorCode.INVALID_REQUEST
