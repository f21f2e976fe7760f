"""Which offset commits and fetches a consumer group accepts (Kafka 4.3's
``ConsumerGroup.validateOffsetCommit`` and ``validateOffsetFetch``, KIP-1251): the ``Group``
contract's offset checks, as a mixin of :class:`~.group.ConsumerGroup`.

They read the group (its members, their epochs as their clients may know them, the topic image)
and raise :class:`~coordinator.core.errors.CoordinatorError`; they never change it. A mixin rather
than functions the group calls: ``validate_offset_commit`` runs for every OffsetCommit, and stays
one method call.
"""

from __future__ import annotations

from collections.abc import Callable
from uuid import UUID

from coordinator.core.effects import Effects
from coordinator.core.errors import CoordinatorError, ErrorCode
from coordinator.core.groups import CommitValidator
from coordinator.core.requests import OffsetCommit
from coordinator.core.topics import TopicsImage

from .member import ConsumerGroupMember


class OffsetValidation:
    """The offset checks of a consumer group; :class:`~.group.ConsumerGroup` supplies the state."""

    group_id: str
    topics: TopicsImage
    members: dict[str, ConsumerGroupMember]
    # The epochs a member's client may know (``ConsumerGroup``'s methods, see them there).
    effective_epoch: Callable[[ConsumerGroupMember], int]
    latest_told_epoch: Callable[[ConsumerGroupMember], int]

    def validate_offset_commit(self, req: OffsetCommit, fx: Effects) -> CommitValidator | None:
        """Kafka 4.3's ``ConsumerGroup.validateOffsetCommit`` (KIP-1251).

        A commit at the member's current epoch is accepted. One at an OLDER epoch is accepted
        partition by partition (the returned validator) if the member still holds the partition
        (assigned or pending revocation) and got it at or before that epoch: the member's epoch
        moved on (a heartbeat bumped it) but its answer had not reached the client yet, so the
        commit is not a zombie's. A newer epoch is never accepted. Refusals are STALE_MEMBER_EPOCH,
        ILLEGAL_GENERATION for members speaking the classic protocol."""
        epoch = req.generation_id_or_member_epoch
        if epoch < 0 and not self.members:
            return None  # admin client or manual assignment while nobody is a member
        member = self.members.get(req.member_id)
        if member is None:
            raise CoordinatorError(
                ErrorCode.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group {self.group_id}."
            )
        classic = member.uses_classic_protocol
        if not classic and not req.supports_member_epoch:
            raise CoordinatorError(
                ErrorCode.UNSUPPORTED_VERSION,
                "OffsetCommit version 9 or above must be used by members using the consumer group protocol",
            )
        current = self.effective_epoch(member)
        if member.member_epoch <= epoch <= self.latest_told_epoch(member):
            return None  # its current epoch, recorded or told since (``latest_told_epoch``)
        if epoch > current:
            raise _stale(
                classic, f"Received {_epoch_name(classic)} {epoch} is newer than current member epoch {current}."
            )
        return lambda topic, topic_id, partition: self._check_assignment_epoch(member, epoch, topic, topic_id, partition)

    def _check_assignment_epoch(
        self, member: ConsumerGroupMember, epoch: int, topic: str, topic_id: UUID | None, partition: int
    ) -> None:
        """Kafka's ``createAssignmentEpochValidator``: one partition of a commit at an older epoch."""
        if topic_id is None:
            info = self.topics.by_name(topic)
            topic_id = None if info is None else info.topic_id
        assigned_at = None if topic_id is None else member.assignment_epoch(topic_id, partition)
        classic = member.uses_classic_protocol
        if assigned_at is None:
            raise _stale(classic, f"Partition {topic}-{partition} is not assigned or pending revocation for member.")
        if epoch < assigned_at:
            raise _stale(
                classic,
                f"Received {_epoch_name(classic)} {epoch} is older than assignment epoch {assigned_at} "
                f"for partition {topic}-{partition}.",
            )

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> None:
        """Kafka's ``ConsumerGroup.validateOffsetFetch`` (a fetch without member id and epoch -1 is
        an admin fetch: not validated). KIP-1251 relaxes commits only: a fetch still names the
        member's current epoch exactly, in Kafka 4.3 as before (a member's epoch does not move while
        it revokes, and the answer that moves it also carries the partitions it will fetch for)."""
        if member_id is None and member_epoch < 0:
            return
        member = self.members.get(member_id or "")
        if member is None:
            raise CoordinatorError(
                ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {self.group_id}."
            )
        # A member's client may know any epoch from its recorded one to the last it may have been
        # told without a record (``latest_told_epoch``); Kafka records each and checks one.
        if not member.member_epoch <= member_epoch <= self.latest_told_epoch(member):
            classic = member.uses_classic_protocol
            raise _stale(
                classic,
                f"The received {_epoch_name(classic)} {member_epoch} does not match the expected member epoch "
                f"{self.effective_epoch(member)}.",
            )


def _stale(classic: bool, message: str) -> CoordinatorError:
    """The refusal of a commit or fetch at the wrong epoch: classic-protocol members understand
    generations (ILLEGAL_GENERATION), consumer-protocol members epochs (STALE_MEMBER_EPOCH)."""
    return CoordinatorError(ErrorCode.ILLEGAL_GENERATION if classic else ErrorCode.STALE_MEMBER_EPOCH, message)


def _epoch_name(classic: bool) -> str:
    return "generation id" if classic else "member epoch"
