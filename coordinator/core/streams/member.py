"""A streams group member as the coordinator keeps it (Kafka's ``StreamsGroupMember``): what the
member told us when it joined (process, endpoint, tags, topology epoch) and where it is in its
reconciliation (epochs, state, assigned and pending-revocation tasks).

Immutable: reconciliation and heartbeats build a new member (``msgspec.structs.replace``), so a
request that fails leaves the old one untouched.
"""

from __future__ import annotations

from enum import IntEnum

import msgspec

from .tasks import NO_TASKS_WITH_EPOCHS, TasksWithEpochs


class MemberState(IntEnum):
    """Kafka's ``streams.MemberState``, persisted as int8 in the current-assignment record."""

    STABLE = 1
    UNREVOKED_TASKS = 2
    UNRELEASED_TASKS = 3
    UNKNOWN = 127


class Endpoint(msgspec.Struct, frozen=True, array_like=True):
    """The member's Interactive Queries endpoint (``application.server``)."""

    host: str
    port: int


class StreamsGroupMember(msgspec.Struct, frozen=True):
    member_id: str
    process_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    topology_epoch: int = 0
    user_endpoint: Endpoint | None = None
    client_tags: tuple[tuple[str, str], ...] = ()
    assigned: TasksWithEpochs = NO_TASKS_WITH_EPOCHS
    pending_revocation: TasksWithEpochs = NO_TASKS_WITH_EPOCHS

    def is_reconciled_to(self, target_epoch: int) -> bool:
        return self.state == MemberState.STABLE and self.member_epoch == target_epoch
