"""The shard is assembled from registrations only, and a core bug in one event of a batch fails
that event (and the work waiting on it) without stopping the batch."""

from __future__ import annotations

from typing import get_args

import pytest

from coordinator.core import requests
from coordinator.core.errors import ErrorCode
from coordinator.core.registry import Registration, merged
from coordinator.core.requests import ConsumerGroupHeartbeat, DescribeGroups, Heartbeat, ListGroups
from coordinator.core.shard import GROUP_TYPES, CoordinatorShard
from coordinator.core.streams.requests import StreamsGroupDescribe, StreamsGroupHeartbeat
from tests.core.consumer.harness import ConsumerHarness


def test_every_core_request_type_is_served_by_exactly_one_registration() -> None:
    shard = CoordinatorShard()
    served = set(shard._handlers)
    share_type = shard.types["share"]
    # Every request struct the adapters can send (the Request union, and the requests a group type
    # package or service brings of its own) has its one handler.
    assert (set(get_args(requests.Request)) | {StreamsGroupHeartbeat, StreamsGroupDescribe}
            | set(share_type.registration.requests) | set(shard.group_configs.registration.requests)) == served
    assert set(shard._error_responses) == served
    assert set(shard.types) == {"classic", "consumer", "streams", "share"} and len(GROUP_TYPES) == 4


def test_a_request_type_registered_twice_is_refused() -> None:
    first = Registration("a", requests={Heartbeat: lambda req, fx: None})
    second = Registration("b", requests={Heartbeat: lambda req, fx: None})
    with pytest.raises(ValueError, match="registered twice"):
        merged([first, second], "requests")


def test_a_core_bug_fails_its_event_and_the_heartbeats_waiting_on_it_but_not_the_batch() -> None:
    h = ConsumerHarness({"foo": 4})
    h.cjoin("a")
    join_b = h.join_request("b")  # waits for the group's target: the next event observes the group

    def broken(req: object, fx: object) -> None:
        raise RuntimeError("a bug")

    h.shard._handlers[ListGroups] = broken
    listing = ListGroups(h.next_ref())
    after = DescribeGroups(h.next_ref(), ("g",))
    results = h.shard.handle_batch([join_b, listing, after], h.now)
    # join_b's membership entry stands; the completion ran before the broken handler, so b is answered.
    assert results[1].failure is not None and listing.ref in results[1].failed
    assert [r.ref for r in results[1].replies] == [join_b.ref]
    assert results[1].replies[0].response.error_code == ErrorCode.NONE
    assert results[2].failure is None and [r.ref for r in results[2].replies] == [after.ref]  # the batch goes on
    for result in results:
        h._absorb(result)
    h.check()


def test_handle_raises_a_core_bug() -> None:
    h = ConsumerHarness({"foo": 4})

    def broken(req: object, fx: object) -> None:
        raise RuntimeError("a bug")

    h.shard._handlers[ConsumerGroupHeartbeat] = broken
    with pytest.raises(RuntimeError, match="a bug"):
        h.shard.handle(h.join_request("a"), h.now)
