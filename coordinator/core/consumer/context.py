"""What every part of the consumer-group type shares: the shard's groups and topic image, the
configuration, lookups, and the timer keys.

The consumer-group type is split by job (see the package docstring); each part takes one
:class:`ConsumerContext`. Only this package tests for ``ConsumerGroup``: the rest of the core sees
groups through the ``Group`` contract (``coordinator.core.groups``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from uuid import UUID

from coordinator.core.config import GroupConfig
from coordinator.core.effects import TimerKey
from coordinator.core.errors import CoordinatorError, ErrorCode
from coordinator.core.group_configs import GroupConfigs
from coordinator.core.groups import Group
from coordinator.core.migration import Bridges
from coordinator.core.topics import TopicsImage

from .group import ConsumerGroup
from .member import ConsumerGroupMember

SESSION_TIMER = "consumer-session"
REBALANCE_TIMER = "consumer-rebalance"
JOIN_TIMER = "consumer-join"
SYNC_TIMER = "consumer-sync"


def session_timer_key(group_id: str, member_id: str) -> TimerKey:
    """``consumer-session/<group>/<member>``: re-armed by every successful heartbeat; expiry fences."""
    return (SESSION_TIMER, group_id, member_id)


def rebalance_timer_key(group_id: str, member_id: str) -> TimerKey:
    """``consumer-rebalance/<group>/<member>``: armed when the member starts revoking; expiry
    fences it if it is still revoking."""
    return (REBALANCE_TIMER, group_id, member_id)


def join_timer_key(group_id: str, member_id: str) -> TimerKey:
    """``consumer-join/<group>/<member>``: a classic member told to rejoin (REBALANCE_IN_PROGRESS)
    must send its JoinGroup within its rebalance timeout; expiry fences it."""
    return (JOIN_TIMER, group_id, member_id)


def sync_timer_key(group_id: str, member_id: str) -> TimerKey:
    """``consumer-sync/<group>/<member>``: a classic member answered a JoinGroup must send its
    SyncGroup within its rebalance timeout; expiry fences it."""
    return (SYNC_TIMER, group_id, member_id)


def member_timer_keys(group_id: str, member_id: str) -> tuple[TimerKey, ...]:
    """Every timer a consumer-group member may have armed."""
    return (
        session_timer_key(group_id, member_id),
        rebalance_timer_key(group_id, member_id),
        join_timer_key(group_id, member_id),
        sync_timer_key(group_id, member_id),
    )


class ConsumerContext:
    def __init__(
        self,
        config: GroupConfig,
        groups: dict[str, Group],
        topics: TopicsImage,
        stopwatch: Callable[[], int],
        bridges: Bridges | None = None,
        group_configs: GroupConfigs | None = None,
    ) -> None:
        self.config = config
        # Each group's consumer.session.timeout.ms / consumer.heartbeat.interval.ms over the broker's.
        self.group_configs = group_configs if group_configs is not None else GroupConfigs(config)
        self.groups = groups  # shared with the shard: one namespace for every group type
        self.topics = topics
        self.stopwatch = stopwatch
        # The classic type's capabilities (online migration), filled by the shard.
        self.bridges = bridges if bridges is not None else Bridges()

    def group(self, group_id: str) -> ConsumerGroup | None:
        group = self.groups.get(group_id)
        return group if isinstance(group, ConsumerGroup) else None

    def consumer_groups(self) -> Iterator[ConsumerGroup]:
        for group in self.groups.values():
            if isinstance(group, ConsumerGroup):
                yield group

    def existing_group(self, group_id: str) -> ConsumerGroup:
        group = self.groups.get(group_id)
        if group is None:
            raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
        if not isinstance(group, ConsumerGroup):
            raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        return group

    def new_group(self, group_id: str) -> ConsumerGroup:
        return ConsumerGroup(group_id, self.topics)

    def subscribed_topic_names(
        self,
        group: ConsumerGroup,
        removed: ConsumerGroupMember | None = None,
        added: ConsumerGroupMember | None = None,
    ) -> set[str]:
        """Names ∪ regex-resolved topics the group subscribes to, with one member swapped."""
        names = Counter(group.subscribed_names)
        regexes = Counter(group.regex_subscriptions)
        if removed is not None:
            names.subtract(removed.subscribed_topic_names)
            if removed.subscribed_topic_regex:
                regexes[removed.subscribed_topic_regex, removed.regex_topics] -= 1
        if added is not None:
            names.update(added.subscribed_topic_names)
            if added.subscribed_topic_regex:
                regexes[added.subscribed_topic_regex, added.regex_topics] += 1
        result = {name for name, count in names.items() if count > 0}
        for (regex, allowed), count in regexes.items():
            if count > 0:
                result |= group.resolve(regex, allowed)
        return result

    def subscribed_topic_names_without(self, group: ConsumerGroup, removed: Iterable[ConsumerGroupMember]) -> set[str]:
        """Names ∪ regex-resolved topics the group subscribes to without the ``removed`` members."""
        names = Counter(group.subscribed_names)
        regexes = Counter(group.regex_subscriptions)
        for member in removed:
            names.subtract(member.subscribed_topic_names)
            if member.subscribed_topic_regex:
                regexes[member.subscribed_topic_regex, member.regex_topics] -= 1
        result = {name for name, count in names.items() if count > 0}
        for (regex, allowed), count in regexes.items():
            if count > 0:
                result |= group.resolve(regex, allowed)
        return result

    def member_topic_ids(self, member: ConsumerGroupMember) -> frozenset[UUID]:
        ids = set()
        for name in member.subscribed_topic_names:
            topic = self.topics.by_name(name)
            if topic is not None:
                ids.add(topic.topic_id)
        if member.subscribed_topic_regex:
            names = self.topics.resolve(member.subscribed_topic_regex)
            if member.regex_topics is not None:
                names = names & member.regex_topics
            for name in names:
                topic = self.topics.by_name(name)
                if topic is not None:
                    ids.add(topic.topic_id)
        return frozenset(ids)

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return self.group_configs.of(group_id).consumer_heartbeat_interval_ms

    def session_timeout_ms(self, group_id: str) -> int:
        return self.group_configs.of(group_id).consumer_session_timeout_ms

    def member_session_timeout_ms(self, group_id: str, member: ConsumerGroupMember) -> int:
        """A classic member keeps the session timeout of its JoinGroup; others the group's."""
        if member.classic is not None:
            return member.classic.session_timeout_ms
        return self.session_timeout_ms(group_id)
