"""A share batch's offsets as runs of equal state: the algebra the share partition is held in.

A batch's state is a list of :class:`StateRun` (the type its record carries), ascending, each
offset in at most one run. In *canonical* form neighbours are never equal (same state, delivery
count, member and lock deadline), so one state has one form: a replayed partition's runs equal the
live one's, and a record written from them is as short as it can be. Lists are never changed once
built: a change makes new ones, so a list may be shared by the state, a change and a record.
"""

from __future__ import annotations

from bisect import bisect_right
from operator import attrgetter

from .records import RecordState, StateRun

# The persisted state ids as plain ints: runs carry ints, and comparing ints is the hot path's test.
AVAILABLE = int(RecordState.AVAILABLE)
ACQUIRED = int(RecordState.ACQUIRED)
ACKNOWLEDGED = int(RecordState.ACKNOWLEDGED)
ARCHIVED = int(RecordState.ARCHIVED)

Runs = list[StateRun]
"""One batch's runs, ascending. Never mutated once built: a change builds new lists, so a list may
be shared by the state, a change and the record that carries it."""


FIRST = attrgetter("first")  # the bisection key of a batch's runs (a C call)


def with_span(run: StateRun, first: int, last: int) -> StateRun:
    """``run``'s state over ``first..last``."""
    return StateRun(first, last, run.state, run.delivery_count, run.member_id, run.lock_deadline)


def _same(a: StateRun, b: StateRun) -> bool:
    return (a.state == b.state and a.delivery_count == b.delivery_count and a.member_id == b.member_id
            and a.lock_deadline == b.lock_deadline)


def clip(runs: Runs, lo: int, hi: int | None = None) -> Runs:
    """The part of ``runs`` within ``lo..hi`` (the same list when nothing is cut)."""
    if runs and runs[0].first >= lo and (hi is None or runs[-1].last <= hi):
        return runs
    out: Runs = []
    for r in runs:
        if r.last < lo:
            continue
        if hi is not None and r.first > hi:
            break
        first, last = max(r.first, lo), r.last if hi is None else min(r.last, hi)
        out.append(r if (first, last) == (r.first, r.last) else with_span(r, first, last))
    return out


def covers(runs: Runs, first: int, last: int) -> bool:
    """The runs (ascending, within ``first..last``) give a state to every offset of ``first..last``."""
    expected = first
    for r in runs:
        if r.first != expected:
            return False
        expected = r.last + 1
    return expected > last


def canonical(runs: Runs) -> Runs:
    """Equal neighbours merged (the same list when there are none): one state has one form, so a
    replayed partition's runs equal the live one's, and a record written from them is as short as
    it can be (as the per-offset records before it were: runs of equal states)."""
    for i in range(1, len(runs)):
        if runs[i - 1].last + 1 == runs[i].first and _same(runs[i - 1], runs[i]):
            break
    else:
        return runs
    out: Runs = []
    for r in runs:
        if out and out[-1].last + 1 == r.first and _same(out[-1], r):
            out[-1] = with_span(r, out[-1].first, r.last)
        else:
            out.append(r)
    return out


def run_index(runs: Runs, offset: int) -> int:
    """The index of the first run of ``runs`` ending at or after ``offset`` (a bisection)."""
    i = bisect_right(runs, offset, key=FIRST) - 1
    return i if i >= 0 and runs[i].last >= offset else i + 1


def overlay(runs: Runs, new: Runs) -> Runs:
    """``runs`` (canonical) with the offsets of ``new`` (ascending, not overlapping) given ``new``'s
    states, in canonical form. Only the runs ``new`` reaches are walked; those around are copied
    as slices, so a few offsets changed in a batch of many runs cost a bisection, not a pass."""
    if not new:
        return runs
    if not runs:
        return canonical(new)
    if len(new) == 1 and len(runs) == 1 and (runs[0].first, runs[0].last) == (new[0].first, new[0].last):
        return new  # the usual case: a whole acquisition moved as one
    i = run_index(runs, new[0].first)
    j = bisect_right(runs, new[-1].last, key=FIRST)  # runs[j:] start past the last new offset
    kept: Runs = []  # the parts of runs[i:j] no new run covers
    k = 0
    for r in runs[i:j]:
        while k < len(new) and new[k].last < r.first:
            k += 1
        lo, m = r.first, k
        while lo <= r.last:
            if m == len(new) or new[m].first > r.last:
                kept.append(r if lo == r.first else with_span(r, lo, r.last))
                break
            if new[m].first > lo:
                kept.append(with_span(r, lo, new[m].first - 1))
            lo = max(lo, new[m].last + 1)
            m += 1
    middle = sorted(kept + new, key=FIRST)  # two ascending lists: one merge for the sort
    # Canonical again where the new states meet their neighbours (the rest was canonical already).
    a = max(i - 1, 0)
    return runs[:a] + canonical(runs[a:i] + middle + runs[j:j + 1]) + runs[j + 1:]
