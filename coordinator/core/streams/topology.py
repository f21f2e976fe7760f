"""A streams group's topology: the checks a joining member's topology must pass, and what it takes
to run it against the topics that exist (Kafka's ``InternalTopicManager.configureTopics``).

The topology is the ``StreamsGroupTopology`` record value (``records.py``), as Kafka keeps it. Two
kinds of failure, as Kafka reports them:

- an **invalid topology** is the heartbeat's error: ``check_request_topology`` (names of Kafka's
  internal topics, invalid topic names, a changelog topic with a partition count, a source topic
  regex) and, from ``configure``, repartition counts that cannot be resolved (a repartition source
  topic no subtopology writes, a loop, a copartition group of undefined counts) raise
  ``CoordinatorError`` with STREAMS_INVALID_TOPOLOGY or INVALID_REQUEST and Kafka's message;
- **topics not (yet) right** is a status the group carries while members stay in it with empty
  assignments (group state NotReady): ``configure`` returns a ``ConfiguredTopology`` whose
  ``status`` is MISSING_SOURCE_TOPICS, INCORRECTLY_PARTITIONED_TOPICS or MISSING_INTERNAL_TOPICS
  (with the internal topics to create).

``configure`` decides the partition count of every internal topic as Kafka does: a repartition
topic with a fixed count keeps it; the others get the largest count among the source and
repartition-source topics of the subtopology that writes them, iterated until every count is known;
copartition groups force their repartition topics to the count their external topics share; a
changelog topic gets its subtopology's number of tasks (the largest count among its source and
repartition-source topics). Internal topics are created with the decided count, replication factor
-1 (the broker's default) unless the topology names one, and the client's configs verbatim. An
existing internal topic with another count is INCORRECTLY_PARTITIONED, never recreated.

Beyond Kafka: a topology whose subtopology ids repeat, or whose copartition indexes point outside
their lists, is refused with STREAMS_INVALID_TOPOLOGY (Kafka fails such a request with an internal
error); a subtopology without any source topic likewise (Kafka: "No source topics found").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from enum import IntEnum

import msgspec

from ..errors import CoordinatorError, ErrorCode
from .records import StreamsGroupTopologyValue, Subtopology, TopicInfo
from .tasks import Task, TasksTuple

KAFKA_INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")
MAX_TOPIC_NAME_LENGTH = 249


class Status(IntEnum):
    """``StreamsGroupHeartbeatResponse.Status.StatusCode``."""

    STALE_TOPOLOGY = 0
    MISSING_SOURCE_TOPICS = 1
    INCORRECTLY_PARTITIONED_TOPICS = 2
    MISSING_INTERNAL_TOPICS = 3
    SHUTDOWN_APPLICATION = 4
    ASSIGNMENT_DELAYED = 5
    MISSING_CLIENT_TAGS = 6


class InternalTopic(msgspec.Struct, frozen=True):
    """An internal topic to create (Kafka's ``CreatableTopic``)."""

    name: str
    partitions: int
    replication_factor: int
    """-1: the broker's default."""
    configs: tuple[tuple[str, str], ...]


class ConfiguredSubtopology(msgspec.Struct, frozen=True):
    subtopology_id: str
    number_of_tasks: int
    stateful: bool
    source_topics: tuple[str, ...]
    """External and repartition source topics: where a task's input partitions come from."""


class ConfiguredTopology(msgspec.Struct, frozen=True):
    """The topology against the topics that exist. Ready (members get tasks) iff ``status`` is None."""

    topology_epoch: int
    subtopologies: Mapping[str, ConfiguredSubtopology] | None
    internal_topics_to_create: tuple[InternalTopic, ...] = ()
    status: Status | None = None
    status_detail: str = ""

    @property
    def is_ready(self) -> bool:
        return self.status is None and self.subtopologies is not None

    def task_counts(self) -> dict[str, int]:
        return {s.subtopology_id: s.number_of_tasks for s in (self.subtopologies or {}).values()}


def summarize_topics(topics: Iterable[str]) -> str:
    """Kafka's ``summarizeTopics``: at most three names, then how many more."""
    names = list(topics)
    if not names:
        return "<none>"
    head = ", ".join(names[:3])
    return head + (f" and {len(names) - 3} additional topics" if len(names) > 3 else "")


def _invalid(message: str) -> CoordinatorError:
    return CoordinatorError(ErrorCode.STREAMS_INVALID_TOPOLOGY, message)


def topic_names(topology: StreamsGroupTopologyValue) -> set[str]:
    """Every topic a topology names: source, repartition sink and source, changelog."""
    names: set[str] = set()
    for s in topology.subtopologies:
        names.update(s.source_topics)
        names.update(s.repartition_sink_topics)
        names.update(t.name for t in s.repartition_source_topics)
        names.update(t.name for t in s.state_changelog_topics)
    return names


def is_valid_topic_name(name: str) -> bool:
    """Kafka's ``Topic.validate``: 1-249 legal characters, not "." or ".."."""
    return (0 < len(name) <= MAX_TOPIC_NAME_LENGTH and name not in (".", "..")
            and _LEGAL_TOPIC.fullmatch(name) is not None)


def required_topics(topology: StreamsGroupTopologyValue) -> set[str]:
    """Kafka's ``StreamsTopology.requiredTopics``: the topics whose metadata the group depends on
    (source, repartition source, changelog), the input of the group's metadata hash."""
    names: set[str] = set()
    for s in topology.subtopologies:
        names.update(s.source_topics)
        names.update(t.name for t in s.repartition_source_topics)
        names.update(t.name for t in s.state_changelog_topics)
    return names


def check_request_topology(topology: StreamsGroupTopologyValue) -> None:
    """What Kafka checks on a joining member's topology before the group sees it (``KafkaApis``,
    ``GroupCoordinatorService``, ``throwIfInvalidTopology``), plus the shape checks that keep a
    malformed topology out of the group."""
    check_topology_names(topology)
    check_topology_shape(topology)


def check_topology_names(topology: StreamsGroupTopologyValue) -> None:
    """``KafkaApis``' checks of any topology a heartbeat carries (Kafka's internal topics, invalid
    names) and the unsupported source-topic regexes, in Kafka's order."""
    names = topic_names(topology)
    internal = sorted(names & KAFKA_INTERNAL_TOPICS)
    if internal:
        raise _invalid(f"Use of Kafka internal topics {','.join(internal)} in a Kafka Streams topology is prohibited.")
    invalid = sorted(n for n in names if not is_valid_topic_name(n))
    if invalid:
        raise _invalid(f"Topic names {','.join(invalid)} are not valid topic names.")
    if any(s.source_topic_regex for s in topology.subtopologies):
        raise CoordinatorError(ErrorCode.INVALID_REQUEST, "Regular expressions for source topics are not supported yet.")


def check_topology_shape(topology: StreamsGroupTopologyValue) -> None:
    """A joining member's topology: changelog topics without a partition count (Kafka), and a
    shape the group can hold (ids unique, copartition indexes inside their lists, a source topic
    for every subtopology)."""
    for s in topology.subtopologies:
        for changelog in s.state_changelog_topics:
            if changelog.partitions != 0:
                raise _invalid(f"Changelog topic {changelog.name} must have an undefined partition count, "
                               f"but it is set to {changelog.partitions}.")
    seen: set[str] = set()
    for s in topology.subtopologies:
        if s.subtopology_id in seen:
            raise _invalid(f"Subtopology {s.subtopology_id} is defined more than once.")
        seen.add(s.subtopology_id)
        if not s.source_topics and not s.repartition_source_topics:
            raise _invalid(f"No source topics found for subtopology {s.subtopology_id}")
        for group in s.copartition_groups:
            if (any(not 0 <= i < len(s.source_topics) for i in group.source_topics)
                    or any(not 0 <= i < len(s.repartition_source_topics) for i in group.repartition_source_topics)
                    or group.source_topic_regex):
                raise _invalid(f"Copartition group of subtopology {s.subtopology_id} refers to a topic it does not have.")


def check_topology_update(stored: StreamsGroupTopologyValue | None, requested: StreamsGroupTopologyValue) -> bool:
    """Kafka's ``maybeUpdateTopology``: True when the requested topology is to be stored (the group
    has none); False when the group's stands (equal, or the group's epoch is newer: the member is
    then told STALE_TOPOLOGY). A different topology at the same or a newer epoch is refused."""
    if stored is None:
        return True
    if stored.epoch > requested.epoch:
        return False
    if stored != requested:
        raise CoordinatorError(ErrorCode.INVALID_REQUEST, "Topology updates are not supported yet.")
    return False


class _TopicError(Exception):
    def __init__(self, status: Status, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


def configure(topology: StreamsGroupTopologyValue, partition_counts: Mapping[str, int]) -> ConfiguredTopology:
    """The topology against the topics that exist (``partition_counts``: topic name -> partitions).
    Raises CoordinatorError for an invalid topology; topic problems come back as a status."""
    try:
        missing = sorted({t for s in topology.subtopologies for t in s.source_topics if t not in partition_counts})
        if missing:
            raise _TopicError(Status.MISSING_SOURCE_TOPICS, f"Source topics {summarize_topics(missing)} are missing.")
        decided = _decide_partition_counts(topology, partition_counts)
        subtopologies = {}
        to_create: dict[str, InternalTopic] = {}
        for s in sorted(topology.subtopologies, key=lambda s: s.subtopology_id):
            inputs = [*s.source_topics, *(t.name for t in s.repartition_source_topics)]
            tasks = max(_count(t, partition_counts, decided) for t in inputs)
            subtopologies[s.subtopology_id] = ConfiguredSubtopology(
                s.subtopology_id, tasks, bool(s.state_changelog_topics), tuple(inputs))
            for info in (*s.repartition_source_topics, *s.state_changelog_topics):
                to_create[info.name] = _creatable(info, decided)
        for name in sorted(required_topics(topology)):
            if name in partition_counts and name in to_create:
                expected = to_create.pop(name).partitions
                if partition_counts[name] != expected:
                    raise _TopicError(Status.INCORRECTLY_PARTITIONED_TOPICS,
                                      f"Existing topic {name} has different number of partitions: expected "
                                      f"{expected}, found {partition_counts[name]}")
        if to_create:
            return ConfiguredTopology(topology.epoch, subtopologies,
                                      tuple(to_create[n] for n in sorted(to_create)), Status.MISSING_INTERNAL_TOPICS,
                                      f"Internal topics are missing: {summarize_topics(sorted(to_create))}")
        return ConfiguredTopology(topology.epoch, subtopologies)
    except _TopicError as e:
        return ConfiguredTopology(topology.epoch, None, (), e.status, e.detail)


def _count(topic: str, existing: Mapping[str, int], decided: Mapping[str, int]) -> int:
    if topic in existing:
        return existing[topic]
    return decided[topic]


def _creatable(info: TopicInfo, decided: Mapping[str, int]) -> InternalTopic:
    partitions = info.partitions if info.partitions != 0 else decided[info.name]
    return InternalTopic(info.name, partitions, info.replication_factor or -1,
                         tuple((c.key, c.value) for c in info.topic_configs))


def _decide_partition_counts(topology: StreamsGroupTopologyValue, existing: Mapping[str, int]) -> dict[str, int]:
    decided = _repartition_counts(topology.subtopologies, existing)
    _enforce_copartitioning(topology.subtopologies, existing, decided)
    for s in topology.subtopologies:  # changelogs: the subtopology's number of tasks
        inputs = [*s.source_topics, *(t.name for t in s.repartition_source_topics)]
        tasks = max(_count(t, existing, decided) for t in inputs)
        for changelog in s.state_changelog_topics:
            decided[changelog.name] = tasks
    return decided


def _repartition_counts(subtopologies: Iterable[Subtopology], existing: Mapping[str, int]) -> dict[str, int]:
    """Kafka's ``RepartitionTopics.setup``: fixed counts, then each sink topic gets the largest count
    among the inputs of the subtopology writing it, until all are known."""
    # Kafka walks a hash map, so which count a sink gets when its writer reads both a known and a
    # not-yet-known topic depends on the order; Streams numbers subtopologies upstream first, so
    # walking them by id resolves upstream counts first, deterministically.
    subtopologies = sorted(subtopologies, key=_id_order)
    counts = {t.name: t.partitions for s in subtopologies for t in s.repartition_source_topics if t.partitions != 0}

    def known(topic: str) -> int | None:
        return existing.get(topic, counts.get(topic))

    while True:
        needed = progress = False
        for s in subtopologies:
            for sink in s.repartition_sink_topics:
                if sink in counts:
                    continue
                candidates = [c for c in (counts.get(t.name) for t in s.repartition_source_topics) if c is not None]
                candidates += [c for c in (existing.get(t) for t in s.source_topics) if c is not None]
                if candidates:
                    counts[sink] = max(candidates)
                    progress = True
                else:
                    needed = True
        if needed and not progress:
            raise _invalid("Failed to compute number of partitions for all repartition topics. "
                           "There may be loops in the topology that cannot be resolved.")
        if not needed:
            break
    for s in subtopologies:
        if any(known(t.name) is None for t in s.repartition_source_topics):
            raise _invalid("Failed to compute number of partitions for all repartition topics, because "
                           "a repartition source topic is never used as a sink topic.")
    return counts


def _id_order(subtopology: Subtopology) -> tuple[int, int, str]:
    """Numeric ids (what Streams sends) in numeric order, then any others by name."""
    sid = subtopology.subtopology_id
    return (0, int(sid), "") if sid.isdigit() else (1, 0, sid)


def _enforce_copartitioning(subtopologies: Iterable[Subtopology], existing: Mapping[str, int],
                            decided: dict[str, int]) -> None:
    """Kafka's ``CopartitionedTopicsEnforcer``, per copartition group of every subtopology."""
    subtopologies = list(subtopologies)
    fixed = {t.name for s in subtopologies for t in s.repartition_source_topics if t.partitions != 0}
    repartition = {t.name for s in subtopologies for t in s.repartition_source_topics}
    for s in subtopologies:
        for group in s.copartition_groups:
            topics = {s.source_topics[i] for i in group.source_topics}
            topics |= {s.repartition_source_topics[i].name for i in group.repartition_source_topics}
            if not topics:
                continue
            repartition_counts = {t: _count(t, existing, decided) for t in topics if t in repartition}
            others = {t: _count(t, existing, decided) for t in topics if t not in repartition}
            if not others:
                if fixed:
                    first = _count(next(iter(sorted(fixed))), existing, decided)
                    if any(_count(t, existing, decided) != first for t in fixed):
                        raise _TopicError(Status.INCORRECTLY_PARTITIONED_TOPICS,
                                          "Following topics do not have the same number of partitions: "
                                          f"[{_java_map(repartition_counts)}]")
                    use = first
                else:
                    use = max(repartition_counts.values(), default=0)
                    if use == 0:
                        raise _invalid("All topics in the copartition group had undefined partition number: "
                                       f"[{', '.join(sorted(repartition_counts))}]")
            else:
                use = next(iter(others.values()))
                if any(c != use for c in others.values()):
                    raise _TopicError(Status.INCORRECTLY_PARTITIONED_TOPICS,
                                      "Following topics do not have the same number of partitions: "
                                      f"[{_java_map(others)}]")
            for topic, count in repartition_counts.items():
                decided[topic] = use
                if topic in fixed and count != use:
                    raise _TopicError(Status.INCORRECTLY_PARTITIONED_TOPICS,
                                      f"Number of partitions [{count}] of repartition topic [{topic}] doesn't match "
                                      f"number of partitions [{use}] of the source topic.")


def _java_map(counts: Mapping[str, int]) -> str:
    """A sorted map as Java's ``TreeMap.toString`` prints it (inside Kafka's brackets)."""
    return "{" + ", ".join(f"{k}={counts[k]}" for k in sorted(counts)) + "}"


def check_owned_tasks(configured: ConfiguredTopology, owned: TasksTuple) -> None:
    """Kafka's ``throwIfRequestContainsInvalidTasks``: a member may report only tasks the topology
    has (a subtopology it defines, a partition below its number of tasks)."""
    counts = configured.task_counts()
    for tasks in (owned.active, owned.standby, owned.warmup):
        for subtopology, partition in sorted(tasks):
            if subtopology not in counts:
                raise CoordinatorError(ErrorCode.INVALID_REQUEST,
                                       f"Subtopology {subtopology} does not exist in the topology.")
            if not 0 <= partition < counts[subtopology]:
                raise CoordinatorError(ErrorCode.INVALID_REQUEST,
                                       f"Task {partition} for subtopology {subtopology} is invalid. "
                                       f"Number of tasks for this subtopology: {counts[subtopology]}")


def all_tasks(configured: ConfiguredTopology) -> list[Task]:
    """Every task of a ready topology, by subtopology then partition."""
    return [(s, p) for s, n in sorted(configured.task_counts().items()) for p in range(n)]
