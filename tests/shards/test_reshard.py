"""Changing the number of shards moves whole partitions between shard logs, and nothing else.

The routing is checked as a pure function (a record set in, the same record set out, split by
shard); the move on disk through `ensure_layout`, including a crash (an abort, or a killed
process) at every step of it; a running shard makes it refuse with one line.
"""

from __future__ import annotations

import collections
import os
import subprocess
import sys
from pathlib import Path

import pytest

from coordinator.core.records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    CoordinatorEpochKey,
    CoordinatorEpochValue,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
    RecordType,
    group_of,
)
from coordinator.recordlog import LogEntry, LogRecord, RealFileSystem, RecordLog
from coordinator.recordlog.lock import try_lock_data_dir
from coordinator.recordlog.segments import recover
from coordinator.security.records import (
    CODEC,
    AclKey,
    AclValue,
    ScramCredentialKey,
    ScramCredentialValue,
)
from coordinator.shards.placement import (
    INTENT_FILE,
    LayoutError,
    ShardLayout,
    read_layout,
    shard_data_dir,
)
from coordinator.shards.reshard import OLD_DIR, TEMP_DIR, Router, ensure_layout, split_entries

PARTITIONS = 50
UNKNOWN_TYPE = 4242  # a record type a later version might write: kept, on shard 0


def enc(record: Record) -> LogRecord:
    return LogRecord(*CODEC.encode_record(record))


def group_records(group: str, n: int) -> list[tuple[LogRecord, ...]]:
    """Entries of one group as handlers write them: some of several records, offsets, tombstones."""
    member = f"{group}-m"
    return [
        (enc(Record(ConsumerGroupMetadataKey(group), ConsumerGroupMetadataValue(n + 1, 0))),
         enc(Record(ConsumerGroupMemberMetadataKey(group, member), ConsumerGroupMemberMetadataValue(
             client_id="c", client_host="h", subscribed_topic_names=("t",), rebalance_timeout_ms=300000))),
         enc(Record(ConsumerGroupCurrentMemberAssignmentKey(group, member), ConsumerGroupCurrentMemberAssignmentValue(
             member_epoch=n + 1, previous_member_epoch=n, state=0)))),
        (enc(Record(OffsetCommitKey(group, "t", n), OffsetCommitValue(offset=100 + n))),),
        (enc(Record(GroupMetadataKey(group), GroupMetadataValue(
            protocol_type="consumer", generation=n, protocol="range", leader=None))),),
        (enc(Record(OffsetCommitKey(group, "t", n), None)),),
    ]


def make_logs(old_shards: int, groups: int = 60) -> list[list[LogEntry]]:
    """Old shard logs of a consistent layout: each group's entries on its owner's log, plus
    coordinator-wide entries (epoch, SCRAM, ACL, an unknown type) on shard 0 and an epoch on each."""
    layout = ShardLayout(PARTITIONS, old_shards)
    logs: list[list[tuple[LogRecord, ...]]] = [[] for _ in range(old_shards)]
    for k in range(old_shards):
        logs[k].append((enc(Record(CoordinatorEpochKey(), CoordinatorEpochValue(3 + k, f"w{k}"))),))
    for i in range(groups):
        group = f"group-{i}"
        logs[layout.shard_of_group(group)].extend(group_records(group, i))
    logs[0].append((enc(Record(ScramCredentialKey("alice", 1), ScramCredentialValue(b"s", b"k", b"v", 4096))),
                    enc(Record(AclKey(2, "t", 3, "User:alice", "*", 3, 3), AclValue()))))
    logs[0].append((LogRecord(UNKNOWN_TYPE, b"\x01opaque", b"v"),))
    # An entry spanning groups of every shard (an offsets-expiration sweep writes tombstones so).
    sweep = tuple(enc(Record(OffsetCommitKey(f"group-{i}", "t", i), None)) for i in range(groups))
    for k in range(old_shards):
        own = tuple(r for r in sweep if layout.shard_of_group(group_of(CODEC.decode_record_key(r.record_type, r.key))) == k)
        logs[k].append(own)
    return [[LogEntry(offset, 1000 + offset, 1, records) for offset, records in enumerate(log)] for log in logs]


def group_sequence(entries: list[LogEntry]) -> dict[str | None, list[tuple[LogRecord, ...]]]:
    """Per group: the sequence of its record tuples, one per entry that holds any of its records."""
    out: dict[str | None, list[tuple[LogRecord, ...]]] = collections.defaultdict(list)
    for entry in entries:
        by_group: dict[str | None, list[LogRecord]] = collections.defaultdict(list)
        for record in entry.records:
            try:
                group = group_of(CODEC.decode_record_key(record.record_type, record.key))
            except ValueError:
                group = None
            by_group[group].append(record)
        for group, records in by_group.items():
            out[group].append(tuple(records))
    return out


def without_epochs(records: list[LogRecord]) -> list[LogRecord]:
    return [r for r in records if r.record_type != RecordType.COORDINATOR_EPOCH]


@pytest.mark.parametrize(("old", "new"), [(1, 2), (2, 3), (3, 1), (1, 50), (50, 7)])
def test_split_keeps_every_record_once_on_its_groups_shard_in_order(old: int, new: int) -> None:
    logs = make_logs(old)
    out = split_entries(logs, ShardLayout(PARTITIONS, new))
    assert len(out) == new
    records_in = without_epochs([r for log in logs for e in log for r in e.records])
    records_out = [r for shard in out for e in shard for r in e.records]
    assert collections.Counter(records_out) == collections.Counter(records_in)
    assert not any(r.record_type == RecordType.COORDINATOR_EPOCH for r in records_out)
    layout = ShardLayout(PARTITIONS, new)
    for k, entries in enumerate(out):
        for entry in entries:
            assert entry.records, "an empty entry is never written"
            for record in entry.records:
                try:
                    group = group_of(CODEC.decode_record_key(record.record_type, record.key))
                except ValueError:
                    group = None
                assert k == (0 if group is None else layout.shard_of_group(group)), record
    # Per group: the same entries (records of one group in one entry stay one entry), in order.
    old_sequences: dict[str | None, list[tuple[LogRecord, ...]]] = {}
    for log in logs:
        for group, seq in group_sequence([LogEntry(e.offset, e.timestamp_ms, 1, tuple(without_epochs(list(e.records))))
                                          for e in log if without_epochs(list(e.records))]).items():
            old_sequences.setdefault(group, []).extend(seq)
    new_sequences: dict[str | None, list[tuple[LogRecord, ...]]] = {}
    for entries in out:
        for group, seq in group_sequence([LogEntry(0, e.timestamp_ms, 1, e.records) for e in entries]).items():
            new_sequences.setdefault(group, []).extend(seq)
    assert new_sequences == old_sequences
    assert len([g for g in new_sequences if g is not None]) == 60


def test_router_sends_coordinator_wide_and_unknown_records_to_shard_zero() -> None:
    router = Router(ShardLayout(PARTITIONS, 5))
    assert router.shard_of(enc(Record(CoordinatorEpochKey(), CoordinatorEpochValue(1, "w")))) is None
    assert router.shard_of(enc(Record(ScramCredentialKey("u", 1), None))) == 0
    assert router.shard_of(enc(Record(AclKey(2, "t", 3, "User:a", "*", 3, 3), AclValue()))) == 0
    assert router.shard_of(LogRecord(UNKNOWN_TYPE, b"k", None)) == 0
    group = next(f"g{i}" for i in range(100) if ShardLayout(PARTITIONS, 5).shard_of_group(f"g{i}") == 3)
    assert router.shard_of(enc(Record(GroupMetadataKey(group), None))) == 3


# ---- on disk -----------------------------------------------------------------------------------


def write_layout_logs(root: Path, logs: list[list[LogEntry]], writer_epoch: int = 4) -> None:
    fs = RealFileSystem()
    for k, entries in enumerate(logs):
        log = RecordLog.open(fs, str(shard_data_dir(root, k) / "log"), writer_epoch=writer_epoch + k)
        for entry in entries:
            log.append(entry.records, entry.timestamp_ms)
        log.flush()
        log.close()
    if len(logs) > 1:
        from coordinator.shards.placement import write_layout
        write_layout(root, ShardLayout(PARTITIONS, len(logs)))


def read_logs(root: Path) -> list[list[LogEntry]]:
    layout = read_layout(root) or ShardLayout(PARTITIONS, 1)
    out = []
    for k in range(layout.shards):
        entries: list[LogEntry] = []
        recover(RealFileSystem(), str(shard_data_dir(root, k) / "log"), replay=entries.append)
        out.append(entries)
    return out


def assert_same_groups(logs: list[list[LogEntry]], expected: list[list[LogEntry]], shards: int) -> None:
    """`logs` hold `expected`'s records (coordinator epochs aside), each on its group's shard, and
    every group's entries the same, in the same order (groups of one shard may interleave otherwise)."""
    assert len(logs) == shards
    want = split_entries(expected, ShardLayout(PARTITIONS, shards))
    for k in range(shards):
        got = [LogEntry(e.offset, e.timestamp_ms, e.writer_epoch, tuple(without_epochs(list(e.records))))
               for e in logs[k] if without_epochs(list(e.records))]
        assert collections.Counter(r for e in got for r in e.records) == collections.Counter(
            r for e in want[k] for r in e.records), f"shard {k}"
        assert group_sequence(got) == group_sequence([LogEntry(0, e.timestamp_ms, 0, e.records) for e in want[k]])
        assert {e.timestamp_ms for e in got} == {e.timestamp_ms for e in want[k]}  # entries keep their time


def test_a_single_process_directory_moves_to_2_then_3_then_1(tmp_path: Path) -> None:
    root = tmp_path / "data"
    original = make_logs(1)
    write_layout_logs(root, original)
    assert read_layout(root) is None  # the single-process layout of earlier versions
    old_epoch = 4
    for shards in (2, 3, 1):
        ensure_layout(root, ShardLayout(PARTITIONS, shards))
        assert (read_layout(root) or ShardLayout(PARTITIONS, 1)).shards == shards
        logs = read_logs(root)
        assert_same_groups(logs, original, shards)
        epochs = {e.writer_epoch for log in logs for e in log}
        assert len(epochs) == 1 and epochs.pop() > old_epoch  # above anything that was on disk
        old_epoch = logs[0][0].writer_epoch
        for log in logs:  # each new log ends with the highest coordinator epoch found
            last = CODEC.decode_record(*log[-1].records[0])
            assert last.key == CoordinatorEpochKey() and isinstance(last.value, CoordinatorEpochValue)
            assert last.value.epoch == 3
        assert not (root / TEMP_DIR).exists() and not (root / OLD_DIR).exists() and not (root / INTENT_FILE).exists()
    # Shrunk to one: no log left behind in the directories of shards that no longer exist.
    assert not (shard_data_dir(root, 1) / "log").exists() and not (shard_data_dir(root, 2) / "log").exists()


def test_new_logs_continue_above_every_old_offset_and_the_next_writer_is_above_them(tmp_path: Path) -> None:
    root = tmp_path / "data"
    write_layout_logs(root, make_logs(2))
    old_next = max(RecordLog.open(RealFileSystem(), str(shard_data_dir(root, k) / "log")).next_offset
                   for k in range(2))
    ensure_layout(root, ShardLayout(PARTITIONS, 3))
    logs = read_logs(root)
    assert all(log[0].offset >= old_next - 1 for log in logs if log)
    opened = RecordLog.open(RealFileSystem(), str(shard_data_dir(root, 2) / "log"))
    assert opened.writer_epoch > logs[2][0].writer_epoch
    opened.close()


def test_an_empty_directory_only_records_the_layout(tmp_path: Path) -> None:
    root = tmp_path / "data"
    ensure_layout(root, ShardLayout(PARTITIONS, 4))
    assert read_layout(root) == ShardLayout(PARTITIONS, 4)
    ensure_layout(root, ShardLayout(PARTITIONS, 4))  # nothing to do


def test_a_running_shard_makes_the_move_refuse_with_one_line(tmp_path: Path) -> None:
    root = tmp_path / "data"
    write_layout_logs(root, make_logs(2))
    lock = try_lock_data_dir(RealFileSystem(), str(shard_data_dir(root, 1)))
    assert lock is not None
    try:
        with pytest.raises(LayoutError) as refused:
            ensure_layout(root, ShardLayout(PARTITIONS, 3))
        assert "shard 1" in str(refused.value) and "running" in str(refused.value)
        assert "\n" not in str(refused.value)
    finally:
        lock.release()
    assert read_layout(root) == ShardLayout(PARTITIONS, 2)  # untouched
    assert not (root / TEMP_DIR).exists()


class Crash(Exception):
    pass


def crash_at(point: str):
    def step(name: str) -> None:
        if name == point:
            raise Crash(name)
    return step


STEPS_2_TO_3 = ["built", "intent", "switched:0", "switched:1", "switched:2", "layout", "done"]


@pytest.mark.parametrize("point", STEPS_2_TO_3)
def test_an_abort_at_any_step_leaves_the_old_layout_or_is_completed_at_the_next_start(tmp_path: Path,
                                                                                     point: str) -> None:
    root = tmp_path / "data"
    original = make_logs(2)
    write_layout_logs(root, original)
    with pytest.raises(Crash):
        ensure_layout(root, ShardLayout(PARTITIONS, 3), on_step=crash_at(point))
    committed = STEPS_2_TO_3.index(point) >= STEPS_2_TO_3.index("intent")
    if not committed:
        assert read_layout(root) == ShardLayout(PARTITIONS, 2)
        assert_same_groups(read_logs(root), original, 2)  # the old layout, intact
    elif point not in ("layout", "done"):
        with pytest.raises(LayoutError, match="between shard layouts"):
            read_layout(root)  # no shard may start on a half-switched directory
    # The next start with the new configuration completes (or redoes) the move.
    ensure_layout(root, ShardLayout(PARTITIONS, 3))
    assert read_layout(root) == ShardLayout(PARTITIONS, 3)
    assert_same_groups(read_logs(root), original, 3)
    assert not (root / INTENT_FILE).exists()


@pytest.mark.parametrize("point", ["built", "switched:1"])
def test_after_an_abort_the_old_configuration_gets_a_consistent_directory(tmp_path: Path, point: str) -> None:
    root = tmp_path / "data"
    original = make_logs(2)
    write_layout_logs(root, original)
    with pytest.raises(Crash):
        ensure_layout(root, ShardLayout(PARTITIONS, 3), on_step=crash_at(point))
    ensure_layout(root, ShardLayout(PARTITIONS, 2))  # the operator went back to two shards
    assert read_layout(root) == ShardLayout(PARTITIONS, 2)
    assert_same_groups(read_logs(root), original, 2)


_CRASHER = """
import os, sys
from pathlib import Path
from coordinator.shards.placement import ShardLayout
from coordinator.shards.reshard import ensure_layout
def step(name):
    if name == sys.argv[2]:
        os._exit(9)  # dies on the spot: no cleanup, locks released by the kernel
ensure_layout(Path(sys.argv[1]), ShardLayout(50, int(sys.argv[3])), on_step=step)
"""


@pytest.mark.parametrize("point", ["built", "intent", "switched:0", "layout"])
def test_a_killed_process_mid_move_is_completed_by_the_next_start(tmp_path: Path, point: str) -> None:
    root = tmp_path / "data"
    original = make_logs(3)
    write_layout_logs(root, original)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    died = subprocess.run([sys.executable, "-c", _CRASHER, str(root), point, "1"], env=env, timeout=120)
    assert died.returncode == 9
    ensure_layout(root, ShardLayout(PARTITIONS, 1))
    assert (read_layout(root) or ShardLayout(PARTITIONS, 1)).shards == 1
    assert_same_groups(read_logs(root), original, 1)


def test_group_ids_land_on_several_shards() -> None:
    # Guard for the tests above: the synthetic groups really spread over the shards.
    layout = ShardLayout(PARTITIONS, 3)
    assert {layout.shard_of_group(f"group-{i}") for i in range(60)} == {0, 1, 2}


def test_a_move_finished_by_another_process_meanwhile_is_not_redone_from_a_stale_layout(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from coordinator.shards import reshard
    from coordinator.shards.placement import write_layout

    root = tmp_path / "data"
    write_layout_logs(root, make_logs(2))
    enter = reshard._locked.__enter__

    def another_process_moved_first(self: reshard._locked) -> None:
        write_layout(root, ShardLayout(PARTITIONS, 4))  # what a concurrent `coordinator serve` left
        enter(self)

    monkeypatch.setattr(reshard._locked, "__enter__", another_process_moved_first)
    with pytest.raises(LayoutError, match="changed while this move was starting"):
        ensure_layout(root, ShardLayout(PARTITIONS, 3))
    assert not (root / TEMP_DIR).exists()
