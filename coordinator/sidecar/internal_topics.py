"""Sidecar mode: the internal topics a streams group needs (its changelog and repartition topics),
created on the upstream cluster with CreateTopics, off the heartbeat's path.

The core names the topics a heartbeat finds missing (with the partition count the topology
decided, the replication factor it declared or -1 for the broker's `default.replication.factor`,
and its topic configs verbatim); the heartbeat's adapter hands them here (`create`) and answers at
once. This is what Kafka's `DefaultAutoTopicCreationManager.createStreamsInternalTopics` does for
the broker that coordinates the group:

- a topic whose creation is in flight is not asked again (every member's heartbeat names it until
  the group sees it);
- a refused topic is not asked again for `retry_after_ms` (twice the heartbeat interval, Kafka's
  back-off), and meanwhile `failures` names it with the upstream's reason, which the adapter puts in
  the heartbeat's MISSING_INTERNAL_TOPICS status ("Creation failed: ...") as Kafka does; each new
  refusal is one `streams_internal_topics_not_created` log line (the same refusal again is not
  logged again);
- created (TOPIC_ALREADY_EXISTS too: another instance, or an earlier attempt whose answer was
  lost): the upstream's topics are read again at once (`created`, which also tells the other
  shards), so the group's next heartbeat sees them. Until this shard's view has them, a heartbeat
  naming them asks only for another read, for the same back-off, not for another creation.

Kafka creates them with the member's principal. Here they are created with the coordinator's own
upstream credentials; the member's CREATE is asked first by the coordinator's own authorizer (the
adapter), and an upstream that refuses the coordinator shows as a failed creation.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from protocol.build import build
from protocol.client import request_class
from protocol.errors import ErrorCode

from ..core.streams.topology import InternalTopic
from ..logging import get_logger
from .cluster import UpstreamCluster
from .wire import ForwardError, UpstreamProtocolError

log = get_logger("coordinator.sidecar.internal_topics")

CREATE_TOPICS = 19
LOWEST_VERSION = 4
"""CreateTopics v4 is the first to take -1 for the broker's default replication factor."""
HIGHEST_VERSION = 7
TIMEOUT_MS = 8_000
"""How long the upstream's controller may take: under the sidecar client's 10 s request timeout."""
MAX_REMEMBERED = 1_000
"""Outcomes kept at most (Kafka's error cache holds 1,000); the oldest to expire go first."""


@dataclass(frozen=True, slots=True)
class _Outcome:
    until: float
    """Monotonic seconds: the back-off ends (then a heartbeat that still names it asks again)."""
    failure: str | None
    """Why the upstream refused it; None: created."""


class UpstreamTopics:
    """The `InternalTopics` of sidecar mode (`runtime/apis/streams_groups.py`)."""

    def __init__(self, cluster: UpstreamCluster, created: Callable[[], None],
                 clock: Callable[[], float] = time.monotonic) -> None:
        """`created` is told once a round created something (the upstream's topics are read again)."""
        self._cluster = cluster
        self._created = created
        self._clock = clock
        self._in_flight: set[str] = set()
        self._outcomes: dict[str, _Outcome] = {}
        self._logged: dict[str, str] = {}
        """The refusal last logged per topic (a repeat is not logged again)."""
        self._tasks: set[asyncio.Task[None]] = set()

    def create(self, topics: Sequence[InternalTopic], retry_after_ms: int) -> None:
        now = self._clock()
        send: list[InternalTopic] = []
        unseen = False
        for topic in topics:
            if topic.name in self._in_flight or self._cluster.catalog.get(topic.name) is not None:
                continue  # being created; or read already and on its way to the group
            outcome = self._outcomes.get(topic.name)
            if outcome is not None and outcome.until > now:
                unseen = unseen or outcome.failure is None
                continue
            send.append(topic)
        if unseen:  # created, but this shard's last read did not have it yet
            self._cluster.request_refresh()
        if not send:
            return
        self._in_flight.update(t.name for t in send)
        task = asyncio.get_running_loop().create_task(self._create(send, retry_after_ms / 1000),
                                                      name="streams-internal-topics")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def failures(self, names: Iterable[str]) -> dict[str, str]:
        now = self._clock()
        return {name: outcome.failure for name in names
                if (outcome := self._outcomes.get(name)) is not None and outcome.failure is not None
                and outcome.until > now}

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _create(self, topics: list[InternalTopic], back_off_s: float) -> None:
        names = [t.name for t in topics]
        log.info("streams_internal_topics_requested", topics=names)
        try:
            results = await self._send(topics)
        except (TimeoutError, ForwardError, UpstreamProtocolError) as exc:
            results = {name: (ErrorCode.NETWORK_EXCEPTION, f"the upstream cannot be reached: {exc}") for name in names}
        finally:
            self._in_flight.difference_update(names)
        until = self._clock() + back_off_s  # from the answer: the controller's time does not eat the back-off
        refused: dict[str, str] = {}
        created = False
        for name in names:
            code, message = results.get(name, (ErrorCode.UNKNOWN_SERVER_ERROR, "the upstream's answer left it out"))
            message = message or code.name  # Kafka puts the error's own message where the answer has none
            if code in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
                self._outcomes[name] = _Outcome(until, None)
                self._logged.pop(name, None)
                created = True
                continue
            self._outcomes[name] = _Outcome(until, message)
            if self._logged.get(name) != message:
                self._logged[name] = message
                refused[name] = message if message == code.name else f"{code.name}: {message}"
        if refused:
            log.warning("streams_internal_topics_not_created", topics=refused)
        self._forget_oldest()
        if created:
            self._created()

    async def _send(self, topics: list[InternalTopic]) -> dict[str, tuple[ErrorCode, str | None]]:
        """name -> (error code, message) as the upstream answered CreateTopics."""
        version = self._cluster.version_for(CREATE_TOPICS, HIGHEST_VERSION, LOWEST_VERSION)
        if version is None:
            why = f"the upstream serves no CreateTopics version from {LOWEST_VERSION} to {HIGHEST_VERSION}"
            return {t.name: (ErrorCode.UNSUPPORTED_VERSION, why) for t in topics}
        request = build(request_class(CREATE_TOPICS, version), {
            "timeout": TIMEOUT_MS, "validate_only": False,
            "topics": [{"name": t.name, "num_partitions": t.partitions, "replication_factor": t.replication_factor,
                        "assignments": [], "configs": [{"name": k, "value": v} for k, v in t.configs]}
                       for t in topics]})
        response, _ = await self._cluster.client.call_any(CREATE_TOPICS, request)
        return {str(r.name): (_code(int(r.error_code)), r.error_message or None) for r in response.topics}

    def _forget_oldest(self) -> None:
        excess = len(self._outcomes) - MAX_REMEMBERED
        if excess > 0:
            for name in sorted(self._outcomes, key=lambda n: self._outcomes[n].until)[:excess]:
                del self._outcomes[name]
                self._logged.pop(name, None)


def _code(value: int) -> ErrorCode:
    try:
        return ErrorCode(value)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR
