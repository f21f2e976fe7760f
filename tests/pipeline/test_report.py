"""The report's numbers on small hand-made histories, against values computed by hand (see the
comments next to each scenario), read both as JSON lines and as a Parquet export."""

from __future__ import annotations

import datetime
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from coordinator.history.export import write_parquet, write_partitioned
from coordinator.history.schema import SCHEMA_VERSION
from pipeline.html import PLOTS
from pipeline.rebalance_report import TABLES, build, find_inputs, load, write

DAY1 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
DAY2 = DAY1 + 86_400_000


class History:
    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def add(self, ts: int, kind: str, group: str, **fields: Any) -> None:
        group_type = fields.pop("group_type", "consumer" if group.startswith("c") else "classic")
        self.rows.append({"v": SCHEMA_VERSION, "ts_ms": ts, "seq": len(self.rows), "node_id": 1, "cluster_id": "t",
                          "kind": kind, "group_id": group, "group_type": group_type, **fields})

    def state(self, ts: int, group: str, old: str, new: str, **fields: Any) -> None:
        self.add(ts, "group_state_changed", group, old_state=old, new_state=new, **fields)

    def parts(self, ts: int, kind: str, group: str, member: str, topic: str, partitions: list[int], **fields: Any) -> None:
        self.add(ts, f"partitions_{kind}", group, member_id=member, partitions=[{"topic": topic, "partitions": partitions}],
                 partition_count=len(partitions), **fields)


def hand_made() -> History:
    h = History()
    # ---- classic group "g1", day 1 -------------------------------------------------------------
    t = DAY1
    h.state(t, "g1", "", "Empty")
    # Episode 1: two joins, one rebalance, 100 -> 500 = 400 ms.
    h.add(t + 100, "member_joined", "g1", member_id="A")
    h.add(t + 100, "rebalance_started", "g1", generation_id=0)
    h.state(t + 100, "g1", "Empty", "PreparingRebalance")
    h.add(t + 150, "member_joined", "g1", member_id="B")
    h.add(t + 150, "rebalance_started", "g1", generation_id=0)
    h.state(t + 400, "g1", "PreparingRebalance", "CompletingRebalance")
    h.state(t + 500, "g1", "CompletingRebalance", "Stable")
    h.add(t + 500, "rebalance_completed", "g1", generation_id=1)
    h.parts(t + 500, "assigned", "g1", "A", "t", [0, 1])
    h.parts(t + 500, "assigned", "g1", "B", "t", [2, 3])
    # Episode 2: B leaves, eager revoke of everything, 10000 -> 10350 = 350 ms. t2, t3 move B -> A
    # (2 moves); four revocations closed after 350 ms each.
    h.add(t + 10_000, "member_left", "g1", member_id="B", reason="leave-group")
    h.parts(t + 10_000, "revoked", "g1", "B", "t", [2, 3], reason="leave-group")
    h.add(t + 10_000, "rebalance_started", "g1", generation_id=1)
    h.parts(t + 10_000, "revoked", "g1", "A", "t", [0, 1], reason="eager-rebalance")
    h.state(t + 10_000, "g1", "Stable", "PreparingRebalance")
    h.state(t + 10_300, "g1", "PreparingRebalance", "CompletingRebalance")
    h.state(t + 10_350, "g1", "CompletingRebalance", "Stable")
    h.parts(t + 10_350, "assigned", "g1", "A", "t", [0, 1, 2, 3])
    # Episode 3: A's session expires, the group empties at once: 0 ms; four revocations stay open.
    h.add(t + 20_000, "session_expired", "g1", member_id="A")
    h.add(t + 20_000, "member_left", "g1", member_id="A", reason="session-timeout")
    h.parts(t + 20_000, "revoked", "g1", "A", "t", [0, 1, 2, 3], reason="session-timeout")
    h.add(t + 20_000, "rebalance_started", "g1", generation_id=2)
    h.state(t + 20_000, "g1", "Stable", "PreparingRebalance")
    h.state(t + 20_000, "g1", "PreparingRebalance", "Empty")
    # ---- classic group "g3", day 1: a static member restarts under a new member id ------------
    h.add(t + 1_000, "rebalance_started", "g3", generation_id=0)
    h.state(t + 1_010, "g3", "PreparingRebalance", "Stable")  # 10 ms
    h.parts(t + 1_010, "assigned", "g3", "m1", "v", [0], group_instance_id="i1")
    h.add(t + 2_000, "rebalance_started", "g3", generation_id=1)
    h.parts(t + 2_000, "revoked", "g3", "m1", "v", [0], group_instance_id="i1")
    h.state(t + 2_030, "g3", "PreparingRebalance", "Stable")  # 30 ms
    h.parts(t + 2_030, "assigned", "g3", "m2", "v", [0], group_instance_id="i1")  # same owner: no move; 30 ms
    # ---- consumer group "c2", day 2 ------------------------------------------------------------
    t = DAY2
    # Episode 1: X joins, epoch 1, Stable after 20 ms.
    h.add(t, "member_joined", "c2", member_id="X")
    h.add(t, "group_epoch_bumped", "c2", group_epoch=1)
    h.add(t, "target_assignment_computed", "c2", group_epoch=1)
    h.state(t, "c2", "", "Reconciling")
    h.parts(t + 10, "assigned", "c2", "X", "u", [0, 1, 2], member_epoch=1)
    h.state(t + 20, "c2", "Reconciling", "Stable")
    # Episode 2: Y joins, X revokes u2 after 100 ms, Y gets it 150 ms later: 300 ms; u2 moves X -> Y,
    # unavailable 150 ms.
    h.add(t + 1_000, "member_joined", "c2", member_id="Y")
    h.add(t + 1_000, "group_epoch_bumped", "c2", group_epoch=2)
    h.state(t + 1_000, "c2", "Stable", "Reconciling")
    h.add(t + 1_100, "member_assignment_changed", "c2", member_id="X", member_epoch=1, assigned_count=0, revoked_count=1)
    h.parts(t + 1_100, "revoked", "c2", "X", "u", [2], member_epoch=1)
    h.parts(t + 1_250, "assigned", "c2", "Y", "u", [2], member_epoch=2)
    h.state(t + 1_300, "c2", "Reconciling", "Stable")
    # Episode 3: Y is fenced by session timeout, u2 goes back to X after 400 ms: 500 ms; one move.
    h.add(t + 5_000, "session_expired", "c2", member_id="Y")
    h.add(t + 5_000, "member_left", "c2", member_id="Y", reason="session-timeout")
    h.add(t + 5_000, "member_fenced", "c2", member_id="Y", reason="session-timeout", partition_count=1)
    h.parts(t + 5_000, "revoked", "c2", "Y", "u", [2], reason="session-timeout")
    h.add(t + 5_000, "group_epoch_bumped", "c2", group_epoch=3)
    h.state(t + 5_000, "c2", "Stable", "Reconciling")
    h.parts(t + 5_400, "assigned", "c2", "X", "u", [2], member_epoch=3)
    h.state(t + 5_500, "c2", "Reconciling", "Stable")
    return h


@pytest.fixture(scope="module")
def history_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("history")
    rows = hand_made().rows
    jsonl = root / "history.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    parquet = root / "history.parquet"
    write_parquet(rows, parquet)
    return {"jsonl": jsonl, "parquet": parquet}


def group_day(spark: Any, path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    report = build(load(spark, [path]))
    return {(r["group_id"], r["day"].isoformat()): r.asDict() for r in report.group_day.collect()}


EXPECTED = {
    ("g1", "2026-01-01"): dict(
        group_type="classic", rebalances=3, rebalances_completed=3, rebalance_triggers=4,
        # durations 400, 350, 0 -> nearest-rank p50 350, p95 400
        rebalance_p50_ms=350, rebalance_p95_ms=400, rebalance_max_ms=400,
        partitions_assigned=8, partitions_moved=2, partitions_revoked=8, revocations_closed=4, revocations_open=4,
        unavailable_ms_total=1400, unavailable_p50_ms=350, unavailable_p95_ms=350, unavailable_max_ms=350,
        members_joined=2, members_left=2, members_fenced_session_timeout=1),
    ("g3", "2026-01-01"): dict(
        group_type="classic", rebalances=2, rebalances_completed=2, rebalance_triggers=2,
        rebalance_p50_ms=10, rebalance_p95_ms=30, rebalance_max_ms=30,
        partitions_assigned=2, partitions_moved=0, partitions_revoked=1, revocations_closed=1, revocations_open=0,
        unavailable_ms_total=30, unavailable_p50_ms=30, unavailable_p95_ms=30, unavailable_max_ms=30,
        members_joined=0, members_left=0, members_fenced_session_timeout=0),
    ("c2", "2026-01-02"): dict(
        group_type="consumer", rebalances=3, rebalances_completed=3, rebalance_triggers=3,
        # durations 20, 300, 500; unavailability 150, 400
        rebalance_p50_ms=300, rebalance_p95_ms=500, rebalance_max_ms=500,
        partitions_assigned=5, partitions_moved=2, partitions_revoked=2, revocations_closed=2, revocations_open=0,
        unavailable_ms_total=550, unavailable_p50_ms=150, unavailable_p95_ms=400, unavailable_max_ms=400,
        members_joined=2, members_left=1, members_fenced_session_timeout=1),
}


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_group_day_numbers_match_the_hand_computed_ones(spark: Any, history_files: dict[str, Path], fmt: str) -> None:
    table = group_day(spark, history_files[fmt])
    assert set(table) == set(EXPECTED)
    for key, expected in EXPECTED.items():
        actual = {k: table[key][k] for k in expected}
        assert actual == expected, key


@pytest.fixture(scope="module")
def report(spark: Any, history_files: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    """The summary and the output directory of one full run over the hand-made history."""
    out = tmp_path_factory.mktemp("report")
    return write(build(load(spark, [history_files["jsonl"]])), out, top=2), out


def test_report_tables_html_and_summary(spark: Any, report: tuple[dict[str, Any], Path]) -> None:
    summary, out = report
    assert summary["groups"] == 3 and summary["days"] == 2
    assert summary["totals"]["rebalances"] == 8
    assert summary["totals"]["partitions_moved"] == 4
    assert summary["totals"]["members_fenced_session_timeout"] == 2
    assert [g["group_id"] for g in summary["top_groups"]] == ["g1", "c2"]  # 3 rebalances each; g1 more unavailable
    day1, day2 = summary["daily"]
    assert (day1["day"], day1["groups"], day1["rebalances"]) == ("2026-01-01", 2, 5)
    # day 1 episode durations 400, 350, 0, 10, 30 -> nearest-rank p50 30, p95 400
    assert (day1["rebalance_p50_ms"], day1["rebalance_p95_ms"], day1["rebalance_max_ms"]) == (30, 400, 400)
    assert (day2["day"], day2["groups"], day2["rebalances"]) == ("2026-01-02", 1, 3)
    assert sum(b["count"] for b in summary["duration_histogram"]) == 8
    for table in TABLES:
        assert sorted(p.name for p in (out / "tables" / table).glob("day=*")) == ["day=2026-01-01", "day=2026-01-02"], table
    page = (out / "report.html").read_text()
    assert page.count("data:image/png;base64,") == PLOTS and "g1" in page
    assert len(list((out / "plots").glob("*.png"))) == PLOTS
    per_partition = spark.read.parquet(str(out / "tables" / "partition_unavailability"))
    (u2,) = per_partition.filter("group_id = 'c2' and topic = 'u' and partition = 2").collect()
    assert (u2["revocations"], u2["unavailable_ms_total"], u2["unavailable_max_ms"]) == (2, 550, 400)


def chromium() -> str | None:
    return next((path for name in ("chromium", "chromium-browser", "google-chrome") if (path := shutil.which(name))), None)


def test_the_report_opens_in_headless_chromium_without_console_messages(report: tuple[dict[str, Any], Path],
                                                                         tmp_path: Path) -> None:
    browser = chromium()
    if browser is None:
        pytest.skip("no chromium binary on PATH (Debian: apt-get install chromium)")
    _, out = report
    screenshot = tmp_path / "report.png"
    # --enable-logging=stderr prints every console message (errors, failed loads) as ":CONSOLE" lines.
    shown = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--enable-logging=stderr",
         "--v=0", f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1300,1500",
         f"--screenshot={screenshot}", (out / "report.html").as_uri()],
        capture_output=True, text=True, timeout=180)
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert [line for line in shown.stderr.splitlines() if ":CONSOLE" in line] == []
    import matplotlib.image

    pixels = matplotlib.image.imread(screenshot)
    assert pixels.shape[:2] == (1500, 1300)
    drawn = (pixels[:, :, :3].min(axis=2) < 0.9).mean()  # share of pixels that are not (nearly) white
    assert drawn > 0.05, f"the screenshot is almost blank ({drawn:.1%} drawn)"
    shutil.copy(screenshot, out / "report.png")  # beside the report, for a person to look at


def test_inputs_are_found_in_directories_and_unknown_files_are_refused(tmp_path: Path, history_files: dict[str, Path]) -> None:
    jsonl, parquet, datasets = find_inputs([history_files["jsonl"].parent])
    assert datasets == []
    assert [Path(p).name for p in jsonl] == ["history.jsonl"] and [Path(p).name for p in parquet] == ["history.parquet"]
    stray = tmp_path / "notes.txt"
    stray.write_text("x")
    with pytest.raises(ValueError, match=r"not a \.jsonl"):
        find_inputs([stray])


def migrating() -> History:
    """Group "m": a classic lifetime (two rebalances: 100 ms and 200 ms, one move), emptied, taken
    over by KIP-848 members (group_type_changed), then a consumer lifetime (one rebalance: 50 ms)."""
    h = History()
    t = DAY1
    h.add(t, "rebalance_started", "m", generation_id=0)
    h.state(t + 100, "m", "PreparingRebalance", "Stable")
    h.parts(t + 100, "assigned", "m", "A", "t", [0])
    h.add(t + 1_000, "rebalance_started", "m", generation_id=1)
    h.parts(t + 1_000, "revoked", "m", "A", "t", [0])
    h.state(t + 1_200, "m", "PreparingRebalance", "Stable")
    h.parts(t + 1_200, "assigned", "m", "B", "t", [0])
    h.add(t + 2_000, "member_left", "m", member_id="B", reason="leave-group")
    h.parts(t + 2_000, "revoked", "m", "B", "t", [0], reason="leave-group")
    h.add(t + 2_000, "rebalance_started", "m", generation_id=2)
    h.state(t + 2_000, "m", "PreparingRebalance", "Empty")
    h.add(t + 3_000, "group_type_changed", "m", group_type="consumer", old_group_type="classic")
    h.state(t + 3_000, "m", "", "Empty", group_type="consumer")
    h.add(t + 3_000, "member_joined", "m", member_id="C", group_type="consumer")
    h.add(t + 3_000, "group_epoch_bumped", "m", group_epoch=1, group_type="consumer")
    h.parts(t + 3_040, "assigned", "m", "C", "t", [0], group_type="consumer")
    h.state(t + 3_050, "m", "Reconciling", "Stable", group_type="consumer")
    return h


def test_a_group_that_changed_type_has_one_lifetime_per_type(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "migrating.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in migrating().rows))
    rows = {(r["group_id"], r["group_type"]): r.asDict() for r in build(load(spark, [path])).group_day.collect()}
    assert set(rows) == {("m", "classic"), ("m", "consumer")}
    classic, consumer = rows["m", "classic"], rows["m", "consumer"]
    assert (classic["rebalances"], classic["rebalance_max_ms"], classic["partitions_moved"]) == (3, 200, 1)
    assert (classic["members_left"], classic["group_type_changes"]) == (1, 0)
    # t0 was unassigned from the leave (2000) until C got it (3040): the revocation is the classic one's.
    assert classic["unavailable_max_ms"] == 1_040
    assert (consumer["rebalances"], consumer["rebalance_max_ms"], consumer["partitions_moved"]) == (1, 50, 1)
    assert (consumer["members_joined"], consumer["group_type_changes"]) == (1, 1)


@pytest.mark.slow  # about 30 s of Spark jobs (a full rebuild, then a run per day): in the slow suite
def test_daily_runs_replace_one_day_and_add_up_to_the_full_rebuild(spark: Any, tmp_path: Path) -> None:
    h = hand_made()
    # A rebalance across midnight: started 300 ms before day 2, Stable 200 ms into it (500 ms, day 1),
    # and a partition revoked before midnight and assigned after it (moved; 400 ms unavailable).
    h.add(DAY2 - 300, "rebalance_started", "g5", generation_id=0)
    h.parts(DAY2 - 300, "assigned", "g5", "a", "w", [0])
    h.add(DAY2 - 250, "rebalance_started", "g5", generation_id=1)
    h.parts(DAY2 - 200, "revoked", "g5", "a", "w", [0])
    h.state(DAY2 + 200, "g5", "PreparingRebalance", "Stable")
    h.parts(DAY2 + 200, "assigned", "g5", "b", "w", [0])
    dataset = tmp_path / "dataset"
    write_partitioned(h.rows, dataset)
    assert sorted(p.name for p in dataset.iterdir()) == ["day=2026-01-01", "day=2026-01-02"]

    full = tmp_path / "full"
    write(build(load(spark, [dataset])), full)
    daily = tmp_path / "daily"
    for day in (datetime.date(2026, 1, 2), datetime.date(2026, 1, 1)):  # any order: a run replaces its day only
        write(build(load(spark, [dataset], day)), daily, day=day)

    for table in TABLES:
        expected = sorted(map(repr, (r.asDict() for r in spark.read.parquet(str(full / "tables" / table)).collect())))
        got = sorted(map(repr, (r.asDict() for r in spark.read.parquet(str(daily / "tables" / table)).collect())))
        assert got == expected, table
    g5 = spark.read.parquet(str(daily / "tables" / "group_day")).filter("group_id = 'g5'").collect()
    assert [(r["day"].isoformat(), r["rebalances"], r["rebalance_max_ms"], r["partitions_moved"], r["unavailable_max_ms"])
            for r in sorted(g5, key=lambda r: r["day"])] == [("2026-01-01", 1, 500, 0, 400), ("2026-01-02", 0, None, 1, None)]
