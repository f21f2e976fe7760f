"""A streams group waiting for source topics the sidecar's view lacks asks for reads of the upstream
on its members' heartbeats, with a back-off, until it has them (`sidecar/source_topics.py`)."""

from __future__ import annotations

import itertools

from coordinator.sidecar.source_topics import FIRST_S, MAX_GROUPS, MOST_S, AwaitedSources


class View:
    def __init__(self) -> None:
        self.topics: set[str] = set()
        self.reads = 0
        self.now = 100.0

    def sources(self) -> AwaitedSources:
        return AwaitedSources(self.topics.__contains__, self.read, lambda: self.now)

    def read(self) -> None:
        self.reads += 1


def test_a_join_naming_known_sources_asks_nothing_and_one_naming_unknown_ones_reads_at_once() -> None:
    view = View()
    view.topics.add("words")
    awaited = view.sources()
    awaited.joined("app", ["words"])
    awaited.heartbeat("app")
    assert view.reads == 0 and len(awaited) == 0
    awaited.joined("other", ["words", "later"])
    assert view.reads == 1 and len(awaited) == 1


def test_heartbeats_read_again_with_a_doubling_back_off_until_the_sources_are_known() -> None:
    view = View()
    awaited = view.sources()
    awaited.joined("app", ["later"])
    reads_at = []
    for _ in range(2000):  # heartbeats every 50 ms for 100 s
        view.now += 0.05
        before = view.reads
        awaited.heartbeat("app")
        if view.reads > before:
            reads_at.append(view.now - 100.0)
    gaps = [b - a for a, b in itertools.pairwise(reads_at)]
    assert FIRST_S <= reads_at[0] < FIRST_S + 0.1
    # Never faster (to a heartbeat's 50 ms), doubling up to the most.
    assert all(later >= earlier - 0.06 for earlier, later in itertools.pairwise(gaps))
    assert max(gaps) <= MOST_S + 0.1 and min(gaps) >= 2 * FIRST_S - 0.01
    view.topics.add("later")
    awaited.heartbeat("app")  # known now: forgotten, no read
    reads = view.reads
    view.now += 2 * MOST_S
    awaited.heartbeat("app")
    assert view.reads == reads and len(awaited) == 0


def test_what_it_remembers_is_bounded() -> None:
    view = View()
    awaited = view.sources()
    for n in range(MAX_GROUPS + 10):
        awaited.joined(f"app-{n}", [f"missing-{n}"])
    assert len(awaited) == MAX_GROUPS
