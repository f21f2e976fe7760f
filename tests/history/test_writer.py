"""The history writer on synthetic events: rotation by size and time, retention, restart and torn
tails, the async flusher, and export to JSON lines and Parquet (also through the CLI)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from coordinator.cli import main as cli_main
from coordinator.core import events
from coordinator.history.export import arrow_schema, export
from coordinator.history.schema import FIELD_NAMES, SCHEMA_VERSION
from coordinator.history.segments import list_segments, read_rows
from coordinator.history.writer import HistoryWriter


class Clock:
    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def make_writer(directory: Path, clock: Clock, **settings: int) -> HistoryWriter:
    options = {"segment_bytes": 1 << 20, "segment_ms": 3_600_000, "retention_ms": 86_400_000, **settings}
    writer = HistoryWriter(directory, node_id=7, cluster_id="c1", clock=clock, **options)
    writer.open()
    return writer


def joined(i: int) -> events.MemberJoined:
    return events.MemberJoined(f"group-{i % 3}", f"member-{i}", None, "client", "/127.0.0.1")


def test_rows_are_stamped_with_time_sequence_and_coordinator(tmp_path: Path) -> None:
    clock = Clock()
    writer = make_writer(tmp_path, clock)
    writer.observe(joined(0))
    clock.now += 5
    writer.observe(events.RebalanceStarted("group-0", "classic", 3, "new member"))
    writer.observe(events.OffsetsCommitted("group-0", 10))  # not history: skipped
    assert writer.flush() == 2
    rows = list(read_rows([tmp_path]))
    assert [(r["kind"], r["ts_ms"], r["seq"]) for r in rows] == [
        ("member_joined", clock.now - 5, 0), ("rebalance_started", clock.now, 1)]
    assert all(r["v"] == SCHEMA_VERSION and r["node_id"] == 7 and r["cluster_id"] == "c1" for r in rows)
    assert rows[1]["generation_id"] == 3 and rows[1]["group_type"] == "classic"
    assert "group_instance_id" not in rows[0], "null fields are omitted"


def test_segments_rotate_by_size_and_keep_every_row_in_order(tmp_path: Path) -> None:
    clock = Clock()
    writer = make_writer(tmp_path, clock, segment_bytes=2048)
    for i in range(200):
        writer.observe(joined(i))
        clock.now += 1
        if i % 17 == 0:
            writer.flush()
    writer.flush()
    segments = list_segments(tmp_path)
    assert len(segments) > 5
    assert all(s.closed for s in segments[:-1])
    closed = [s for s in segments if s.closed]
    longest_line = max(len(line) for s in segments for line in s.path.read_bytes().splitlines(keepends=True))
    for segment in closed:
        size = segment.path.stat().st_size
        assert 2048 <= size < 2048 + longest_line
        rows = list(read_rows([segment.path]))
        assert segment.base_seq == rows[0]["seq"] and segment.first_ts == rows[0]["ts_ms"]
        assert segment.last_ts == rows[-1]["ts_ms"]
    assert [r["seq"] for r in read_rows([tmp_path])] == list(range(200))


def test_segments_rotate_by_time_even_when_idle(tmp_path: Path) -> None:
    clock = Clock()
    writer = make_writer(tmp_path, clock, segment_ms=1000)
    writer.observe(joined(0))
    writer.flush()
    clock.now += 999
    writer.observe(joined(1))
    writer.flush()
    assert [s.closed for s in list_segments(tmp_path)] == [False]
    clock.now += 1
    writer.flush()  # nothing to write, but the active segment is a second old: closed
    assert [s.closed for s in list_segments(tmp_path)] == [True]
    writer.observe(joined(2))
    writer.flush()
    segments = list_segments(tmp_path)
    assert [s.closed for s in segments] == [True, False]
    assert segments[1].base_seq == 2


def test_retention_deletes_closed_segments_whose_last_row_is_too_old(tmp_path: Path) -> None:
    clock = Clock()
    writer = make_writer(tmp_path, clock, segment_ms=1000, retention_ms=10_000)
    for _ in range(5):  # five segments, one second apart
        writer.observe(joined(0))
        writer.flush()
        clock.now += 1000
    writer.observe(joined(1))
    writer.flush()
    before = list_segments(tmp_path)
    assert len(before) == 6
    clock.now = before[1].last_ts + 10_001  # segments 0 and 1 are now past retention
    writer.observe(joined(2))
    writer.flush()
    after = list_segments(tmp_path)
    assert [s.base_seq for s in after] == [2, 3, 4, 5, 6]
    # The active segment is never deleted, however old.
    clock.now += 10**9
    writer.segments.segment_ms = 10**12
    writer.segments.enforce_retention()
    assert list_segments(tmp_path)[-1].base_seq == 6


def test_retention_minus_one_keeps_everything(tmp_path: Path) -> None:
    clock = Clock()
    writer = make_writer(tmp_path, clock, segment_ms=1, retention_ms=-1)
    for i in range(3):
        writer.observe(joined(i))
        writer.flush()
        clock.now += 10**9
    writer.flush()
    assert len(list_segments(tmp_path)) == 3


def test_restart_closes_the_previous_active_segment_cuts_a_torn_line_and_continues_sequence(tmp_path: Path) -> None:
    clock = Clock()
    writer = make_writer(tmp_path, clock)
    for i in range(3):
        writer.observe(joined(i))
    writer.flush()
    (active,) = list_segments(tmp_path)
    assert not active.closed
    with open(active.path, "ab") as handle:  # a crash in the middle of a write
        handle.write(b'{"kind":"member_jo')
    assert [r["seq"] for r in read_rows([tmp_path])] == [0, 1, 2], "readers skip an incomplete last line"

    clock.now += 60_000
    restarted = make_writer(tmp_path, clock)
    (closed,) = list_segments(tmp_path)
    assert closed.closed and closed.last_ts == clock.now - 60_000
    assert closed.path.read_bytes().endswith(b"}\n")
    restarted.observe(joined(3))
    restarted.flush()
    assert [r["seq"] for r in read_rows([tmp_path])] == [0, 1, 2, 3]


def test_a_corrupt_line_in_the_middle_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"ts_ms":1}\nnot json\n{"ts_ms":2}\n')
    with pytest.raises(ValueError, match="undecodable"):
        list(read_rows([path]))


def test_async_flusher_writes_without_explicit_flush_and_close_writes_the_rest(tmp_path: Path) -> None:
    async def scenario() -> None:
        writer = HistoryWriter(tmp_path, node_id=1, cluster_id="c", segment_bytes=1 << 20, segment_ms=3_600_000,
                               retention_ms=-1, flush_interval_ms=20)
        writer.open()
        writer.start()
        writer.observe(joined(0))
        deadline = asyncio.get_running_loop().time() + 10
        while writer.written < 1:
            assert asyncio.get_running_loop().time() < deadline, "flusher never wrote"
            await asyncio.sleep(0.01)
        writer.observe(joined(1))
        await writer.close()

    asyncio.run(scenario())
    assert [r["member_id"] for r in read_rows([tmp_path])] == ["member-0", "member-1"]
    assert all(s.closed for s in list_segments(tmp_path))


def test_buffer_bound_drops_rows_instead_of_blocking(tmp_path: Path) -> None:
    writer = HistoryWriter(tmp_path, node_id=1, cluster_id="c", segment_bytes=1 << 20, segment_ms=3_600_000,
                           retention_ms=-1, max_buffered_rows=5)
    writer.open()
    for i in range(8):
        writer.observe(joined(i))
    assert writer.flush() == 5 and writer.dropped == 3


def _history(tmp_path: Path) -> tuple[Path, Clock]:
    clock = Clock(1_700_000_000_000)
    directory = tmp_path / "data" / "history"
    writer = make_writer(directory, clock, segment_bytes=1024)
    for i in range(50):
        writer.observe(joined(i))
        clock.now += 1000
    writer.observe(events.MemberAssignmentChanged("consumer-group", "member-1", 4, 2, 1))
    writer.flush()
    return directory, clock


def test_export_jsonl_selects_the_time_range(tmp_path: Path) -> None:
    directory, _ = _history(tmp_path)
    start = 1_700_000_000_000
    out = tmp_path / "out.jsonl"
    count = export(directory, out, "jsonl", since_ms=start + 10_000, until_ms=start + 20_000)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert count == len(rows) == 10
    assert [r["ts_ms"] for r in rows] == [start + 1000 * i for i in range(10, 20)]


def test_export_parquet_has_the_schema_and_the_rows(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    directory, _ = _history(tmp_path)
    out = tmp_path / "out.parquet"
    assert export(directory, out, "parquet") == 51
    table = pq.read_table(out)
    assert table.schema.equals(arrow_schema())
    assert tuple(table.schema.names) == FIELD_NAMES
    rows = table.to_pylist()
    assert [r["seq"] for r in rows] == list(range(51))
    assert rows[0]["member_id"] == "member-0" and rows[0]["group_instance_id"] is None
    last = rows[-1]
    assert (last["kind"], last["member_epoch"], last["assigned_count"], last["revoked_count"]) == (
        "member_assignment_changed", 4, 2, 1)


def test_cli_export_accepts_iso_times_and_reports_the_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _history(tmp_path)
    out = tmp_path / "cli.parquet"
    # 1_700_000_000_000 ms is 2023-11-14T22:13:20Z
    code = cli_main(["history", "export", "--data-dir", str(tmp_path / "data"), "--format", "parquet",
                     "--since", "2023-11-14T22:13:30Z", "--until", "1700000040000", "--output", str(out)])
    assert code == 0
    assert "exported 30 rows" in capsys.readouterr().err
    import pyarrow.parquet as pq

    assert pq.read_table(out).num_rows == 30


def test_cli_export_of_a_directory_without_history_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli_main(["history", "export", "--data-dir", str(tmp_path / "nothing"), "--output", str(tmp_path / "x")])
    assert code == 1 and "no history" in capsys.readouterr().err


def test_a_group_id_taken_over_by_the_other_protocol_gets_a_type_change_row(tmp_path: Path) -> None:
    # What the core does today: an empty classic group is replaced by a KIP-848 heartbeat (offline
    # upgrade); later the consumer group is deleted and the id comes back as a classic group.
    clock = Clock()
    writer = make_writer(tmp_path, clock)
    writer.observe(events.GroupStateChanged("g", "classic", "", "Empty"))
    writer.observe(events.MemberJoined("g", "m1", None, "client", "/127.0.0.1"))
    writer.observe(events.MemberLeft("g", "m1", "leave-group"))
    writer.observe(events.GroupStateChanged("other", "consumer", "", "Empty"))
    writer.observe(events.GroupStateChanged("g", "consumer", "", "Empty"))
    writer.observe(events.MemberJoined("g", "m2", None, "client", "/127.0.0.1", group_type="consumer"))
    writer.observe(events.GroupDeleted("g", "consumer", "delete-groups"))
    writer.observe(events.GroupStateChanged("g", "classic", "", "Empty"))
    writer.flush()
    rows = [(r["kind"], r["group_id"], r.get("group_type"), r.get("old_group_type")) for r in read_rows([tmp_path])]
    assert rows == [
        ("group_state_changed", "g", "classic", None),
        ("member_joined", "g", "classic", None),
        ("member_left", "g", "classic", None),
        ("group_state_changed", "other", "consumer", None),
        ("group_type_changed", "g", "consumer", "classic"),
        ("group_state_changed", "g", "consumer", None),
        ("member_joined", "g", "consumer", None),
        ("group_deleted", "g", "consumer", None),
        ("group_type_changed", "g", "classic", "consumer"),
        ("group_state_changed", "g", "classic", None),
    ]
    assert [r["seq"] for r in read_rows([tmp_path])] == list(range(10))
