"""Logs written before the state was held as runs: the same operations write the same bytes, and
such a log replays to the state the per-offset core had.

``data/per_offset_log.json`` was written by the per-offset core (commit bf23ff1, the last before
runs) running :func:`scenario`: every record it logged (type, key, value as hex) and, after the
last step, each in-flight offset's state, the start and next offsets and the batches. Regenerate
it only from a per-offset tree (``git archive bf23ff1 coordinator protocol | tar -x -C OLD``), run
outside the checkout so that the old ``coordinator`` comes first:
``cd /tmp && PYTHONPATH=OLD:CHECKOUT CHECKOUT/.venv/bin/python -m tests.core.share.test_old_log``.
"""

from __future__ import annotations

import json
from pathlib import Path

from coordinator.core.share.acknowledgement import AckBatch, AckType, acknowledge
from coordinator.core.share.acquisition import AcquireMode, acquire
from coordinator.core.share.config import ShareConfig
from coordinator.core.share.fetch import acquire_from_log
from coordinator.core.share.release import advance_log_start, expire_locks, release_member

from .twin import GROUP, TOPIC, Twin

FIXTURE = Path(__file__).parent / "data" / "per_offset_log.json"
LOG = [(0, 4), (5, 9), (10, 19), (20, 20), (21, 39), (40, 59), (60, 99)]
NOW = 1_700_000_000_000
LOCK = 30_000


def scenario() -> Twin:
    """Every kind of change: whole and partial acquisitions in both modes, accepts, per-offset
    types, releases, rejects, renewals, a lock expiry, a session end, redeliveries up to the
    throttle and the delivery limit, aborted transactions, the log start passing records."""
    t = Twin(config=ShareConfig(lock_duration_ms=LOCK, delivery_count_limit=4, max_in_flight_records=60))
    a, rel, rej, g, renew = (int(x) for x in (AckType.ACCEPT, AckType.RELEASE, AckType.REJECT, AckType.GAP,
                                              AckType.RENEW))

    def ack(member: str, *batches: tuple[int, int, tuple[int, ...]], now: int = NOW) -> None:
        result = acknowledge(t.p, member, [AckBatch(*b) for b in batches], now, t.config)
        assert not result.error, result
        t.log_records(result.records)

    t.log_records(acquire(t.p, "m1", LOG, 7, NOW, t.config).records)  # 0-9
    t.log_records(acquire(t.p, "m2", LOG, 12, NOW, t.config, AcquireMode.RECORD_LIMIT).records)  # 10-21
    ack("m1", (0, 4, (a,)), (5, 9, (a, rel, rej, g, a)))
    ack("m2", (10, 13, (renew,)), now=NOW + 1_000)
    ack("m2", (14, 15, (renew, renew)), (15, 17, (a,)))  # a shared boundary: 15 renewed, then accepted
    t.log_records(acquire(t.p, "m1", LOG, 5, NOW + 2_000, t.config).records)  # redeliveries 6, 14, 15...
    t.log_records(release_member(t.p, "m1", t.config))
    t.log_records(expire_locks(t.p, NOW + LOCK + 5, t.config))  # m2's unrenewed locks end
    for step in range(6):  # redelivered until throttled, then the delivery limit archives
        now = NOW + LOCK * (step + 2)
        got = acquire_from_log(t.p, "m3", 0, LOG, [(20, 20)], 9, now, t.config)
        t.log_records(got.records)
        for x in got.acquired:
            ack("m3", (x.first_offset, x.last_offset, (rel if x.first_offset % 3 else a,)), now=now)
    t.log_records(advance_log_start(t.p, 30))
    got = acquire_from_log(t.p, "m4", 30, LOG, [], 30, NOW + 10 * LOCK, t.config)
    t.log_records(got.records)
    pattern = (a, a, rej, a, renew, rel)
    for x in got.acquired[:-1]:  # the last range stays held
        ack("m4", (x.first_offset, x.last_offset, tuple(pattern[o % 6] for o in range(x.first_offset,
                                                                                      x.last_offset + 1))),
            now=NOW + 10 * LOCK)
    return t


def _state(t: Twin) -> dict[str, object]:
    p = t.p
    return {"start_offset": p.start_offset, "next_offset": p.next_offset,
            "batches": sorted([first, last] for first, last in p.batches.items()),
            "offsets": [[o, int(s.state), s.delivery_count, s.member_id, s.lock_deadline]
                        for o, s in sorted(p.offsets.items())]}


def _fixture() -> dict[str, object]:
    loaded: dict[str, object] = json.loads(FIXTURE.read_text())
    return loaded


def _log(fixture: dict[str, object]) -> list[tuple[int, bytes, bytes | None]]:
    entries = fixture["log"]
    assert isinstance(entries, list)
    return [(rtype, bytes.fromhex(key), None if value is None else bytes.fromhex(value))
            for rtype, key, value in entries]


def test_the_same_operations_write_the_same_bytes_as_the_per_offset_core() -> None:
    fixture = _fixture()
    t = scenario()
    assert t.log == _log(fixture)
    assert _state(t) == fixture["state"]


def test_a_per_offset_cores_log_replays_whole_and_compacted_to_its_state() -> None:
    fixture = _fixture()
    old = Twin.__new__(Twin)
    old.config = ShareConfig(lock_duration_ms=LOCK, delivery_count_limit=4, max_in_flight_records=60)
    old.log = _log(fixture)
    for entries in (old.log, old.compacted()):
        old.partitions = old.replayed(entries)
        assert _state(old) == fixture["state"]
    # ... and it goes on from there: what is held can be acknowledged, and the start moves.
    p = old.partitions.get(GROUP, TOPIC, 0)
    assert p is not None
    held = [(o, s.member_id, s.lock_deadline) for o, s in p.offsets.items() if s.member_id]
    assert held, "the scenario ends with records held"
    o, member, deadline = held[0]
    result = acknowledge(p, member, [AckBatch(o, o, (int(AckType.ACCEPT),))], deadline - 1, old.config)
    assert result.error == 0
    assert p.start_offset > o or p.offsets[o].state.name == "ACKNOWLEDGED"


if __name__ == "__main__":  # the fixture, from a per-offset tree (see the module's docstring)
    made = scenario()
    FIXTURE.parent.mkdir(exist_ok=True)
    FIXTURE.write_text(json.dumps({"log": [[rtype, key.hex(), None if value is None else value.hex()]
                                           for rtype, key, value in made.log],
                                   "state": _state(made)}, indent=0) + "\n")
