"""The package end to end, without a handler: a group's records replayed equal the live state at
every step of a scale-out from 2 to 3 members with warm-ups (topology -> assignor -> warm-up step
-> reconciliation -> records), and the group state follows Kafka's rules."""

from __future__ import annotations

import msgspec

from coordinator.core.streams import records as r
from coordinator.core.streams.assignor import AssignorMember, SubtopologySpec, assign
from coordinator.core.streams.group import StreamsGroupState, with_tasks_cleared
from coordinator.core.streams.member import StreamsGroupMember
from coordinator.core.streams.reconciliation import ownership, reconcile
from coordinator.core.streams.tasks import Task, TasksTuple
from coordinator.core.streams.topology import configure
from coordinator.core.streams.warmup import MemberTaskOffsets, WarmupConfig, WarmupMember, refine

TOPOLOGY = r.StreamsGroupTopologyValue(0, (r.Subtopology(
    "0", source_topics=("words",),
    state_changelog_topics=(r.TopicInfo("app-counts-changelog", topic_configs=(r.TopicConfig("cleanup.policy",
                                                                                               "compact"),)),)),))
CONFIGURED = configure(TOPOLOGY, {"words": 6, "app-counts-changelog": 6})
SUBTOPOLOGIES = {s.subtopology_id: SubtopologySpec(s.number_of_tasks, s.stateful)
                 for s in (CONFIGURED.subtopologies or {}).values()}


class World:
    """A live group the way a handler will drive it: every change is records, replayed."""

    def __init__(self) -> None:
        self.live: dict[str, StreamsGroupMember] = {}
        self.offsets: dict[str, MemberTaskOffsets] = {}
        self.log: list[r.StreamsRecord] = []
        self.epoch = 0
        self.target: dict[str, TasksTuple] = {}
        self.refined: dict[str, TasksTuple] | None = None
        self.timestamp = 0

    def write(self, *records: r.StreamsRecord) -> None:
        self.log.extend(records)

    def join(self, member_id: str) -> None:
        member = StreamsGroupMember(member_id=member_id, process_id=f"p-{member_id}", client_id="c",
                                    client_host="/127.0.0.1", rebalance_timeout_ms=300000)
        self.live[member_id] = member
        self.offsets[member_id] = MemberTaskOffsets(reported=True)
        if not self.log:
            self.write(r.topology_record("app", TOPOLOGY))
        self.epoch += 1
        self.write(r.member_metadata_record("app", member),
                   r.group_epoch_record("app", self.epoch, 42, TOPOLOGY.epoch, {"num.standby.replicas": "0"}))
        previous = {m: AssignorMember(x.process_id, frozenset(x.assigned.active), x.assigned.standby)
                    for m, x in self.live.items()}
        self.target = assign(previous, SUBTOPOLOGIES, 0)
        self.refined = None
        self.write(*(r.target_member_record("app", m, t) for m, t in sorted(self.target.items())),
                   r.target_epoch_record("app", self.epoch, 1000 * self.epoch))
        self.timestamp = 1000 * self.epoch

    def heartbeat_all(self, config: WarmupConfig) -> dict[str, TasksTuple]:
        """Each member heartbeats once, reporting what it runs, toward the refined target."""
        warm = {m: WarmupMember(x.process_id, x.assigned.tasks(), self.offsets[m]) for m, x in self.live.items()}
        refined = refine(warm, self.target, ["0"], config)
        if self.refined is not None and refined != self.refined:
            # A refinement step is an epoch of its own (Kafka's REFINED bump): members reconciled
            # to the current epoch only move on when it advances. Targets stay; the timestamp too.
            self.epoch += 1
            self.write(r.group_epoch_record("app", self.epoch, 42, TOPOLOGY.epoch, {"num.standby.replicas": "0"}),
                       r.target_epoch_record("app", self.epoch, self.timestamp))
        self.refined = refined
        for member_id in sorted(self.live):
            member = self.live[member_id]
            new = reconcile(member, self.epoch, refined[member_id], ownership(self.live.values()),
                            member.assigned.tasks())
            if new != member:
                self.live[member_id] = new
                self.write(r.current_assignment_record("app", new))
            running: dict[Task, str] = {}
            for x in self.live.values():
                for task in [*x.assigned.active, *x.pending_revocation.active]:
                    assert running.setdefault(task, x.member_id) == x.member_id
        return refined

    def replayed(self) -> StreamsGroupState:
        group = StreamsGroupState("app")
        for record in self.log:
            group.replay(r.decode_record(*r.encode_record(record)))
        return group


def test_a_scale_out_with_warm_ups_replays_to_the_live_group_at_every_step() -> None:
    world = World()
    assert StreamsGroupState("app").state_name == "Empty"
    world.join("a")
    world.join("b")
    assert world.replayed().state_name == "Reconciling"
    for _ in range(3):
        world.heartbeat_all(WarmupConfig(2, 100))
        assert world.replayed().members == world.live
    group = world.replayed()
    assert group.state_name == "Stable" and group.targets == world.target
    assert [len(world.live[m].assigned.active) for m in "ab"] == [3, 3]

    world.join("c")  # reports offsets (v1) but has no state: the moves wait for warm-ups
    refined = world.heartbeat_all(WarmupConfig(2, 100))
    assert len(world.target["c"].active) == 2 and refined["c"].warmup == world.target["c"].active
    assert refined["c"].active == frozenset()
    for _ in range(3):
        world.heartbeat_all(WarmupConfig(2, 100))
        assert world.replayed().members == world.live
    assert world.live["c"].assigned.warmup == world.target["c"].active
    assert sum(len(m.assigned.active) for m in world.live.values()) == 6  # nothing stopped
    assert world.replayed().state_name == "Stable"  # stable at the refined assignment

    # c restored its warm-ups: promoted, the old owners release first, then c runs them.
    warmups = world.live["c"].assigned.warmup
    world.offsets["c"] = MemberTaskOffsets({t: 990 for t in warmups}, {t: 1000 for t in warmups}, True)
    for _ in range(4):
        world.heartbeat_all(WarmupConfig(2, 100))
        assert world.replayed().members == world.live
    assert world.live["c"].assigned.tasks() == world.target["c"]
    assert all(world.live[m].assigned.tasks() == world.target[m] for m in "abc")


def test_tombstones_remove_a_member_and_then_the_group() -> None:
    world = World()
    world.join("a")
    world.heartbeat_all(WarmupConfig())
    leaving = world.live["a"]
    group = world.replayed()
    group.replay(r.member_tombstones("app", "a")[0])
    assert group.members["a"] == with_tasks_cleared(leaving)
    for record in r.member_tombstones("app", "a")[1:]:
        group.replay(record)
    assert group.members == {} and group.targets == {} and group.state_name == "Empty"
    for record in r.group_tombstones("app", []):
        group.replay(record)
    assert group.deleted and group.topology is None


def test_a_group_whose_topology_is_not_validated_is_not_ready() -> None:
    group = StreamsGroupState("app")
    group.replay(r.topology_record("app", TOPOLOGY))
    member = StreamsGroupMember(member_id="a", process_id="p")
    group.replay(r.member_metadata_record("app", member))
    group.replay(r.group_epoch_record("app", 1, 0, -1, {}))
    assert group.state_name == "NotReady"
    group.replay(r.group_epoch_record("app", 1, 0, 0, {}))
    assert group.state_name == "Assigning"
    group.replay(r.target_epoch_record("app", 1, 5))
    assert group.state_name == "Reconciling"
    group.replay(r.current_assignment_record("app", msgspec.structs.replace(member, member_epoch=1)))
    assert group.state_name == "Stable"
