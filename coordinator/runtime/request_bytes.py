"""The server-wide budget of request bytes held in memory: Kafka's `queued.max.request.bytes`.

A connection holds request bytes between their arrival and the moment its handler takes the
request: a frame still arriving, and the frames queued behind its request in flight. Each
connection reports its own count as it changes (`add`), so `held` is the server's total.

While the budget is spent, a connection holding more than `FREE_BYTES` stops reading and waits
(`wait`); nothing is dropped and nothing is answered with an error, as Kafka's broker mutes a
channel when its memory pool is exhausted. When bytes are released and the total is under the
limit again, every waiting connection reads again. Reads are cut to the room left, but
never below `LEAST_READ`, so many connections reading in the same loop turn overshoot the limit
by at most that much each.

Bytes are counted as they arrive, not as sizes claim (a claim costs nothing until its bytes come),
so requests can spend the budget while each is only partly in: three 60 MB requests under a
100 MB budget would wait on each other for ever. So one waiting connection at a time may
overdraw: the one whose frame lacks the fewest bytes reads that frame to its end (`may_hold`),
then the next is chosen. A peer trickling a huge claim is the last to be chosen while anyone is
nearer to done, and overdrawing adds at most one frame (`socket.request.max.bytes`).

`FREE_BYTES` is what any connection may hold whatever the budget: heartbeats, commits and joins
are smaller, so a group keeps working while large requests (or peers that claim 100 MB frames
and trickle them) have spent the budget. The bytes held are therefore at most
`queued.max.request.bytes + socket.request.max.bytes + max.connections × (FREE_BYTES + LEAST_READ)`.
"""

from __future__ import annotations

import sys
from typing import Protocol

from .. import metrics

FREE_BYTES = 16 * 1024
LEAST_READ = 512


class Waiter(Protocol):
    @property
    def missing(self) -> int:
        """Bytes its frame being received still lacks (0: it has none partly in)."""

    def budget_freed(self) -> None:
        """The budget has room again, or this waiter may overdraw: read again (unless something
        else holds reading)."""


class RequestBytes:
    def __init__(self, limit: int) -> None:
        """`limit` 0 or below: unbounded (Kafka's -1)."""
        self.limit = limit if limit > 0 else sys.maxsize
        self.held = 0
        self._waiting: dict[Waiter, None] = {}  # insertion-ordered: woken first come, first served
        self.overdraft: Waiter | None = None
        """The one waiter reading its frame to the end while the budget is spent."""
        self._overdraft_left = 0
        metrics.REQUEST_BYTES_HELD.set_function(lambda: self.held)

    @property
    def spent(self) -> bool:
        return self.held >= self.limit

    def add(self, delta: int) -> None:
        """A connection's held bytes changed by `delta`."""
        self.held += delta
        if delta < 0 and self._waiting and self.held < self.limit:
            waiting, self._waiting = self._waiting, {}
            for waiter in waiting:
                waiter.budget_freed()

    def frame_in(self, waiter: Waiter) -> None:
        """The frame `waiter` overdrew for is in: another waiter may overdraw."""
        if waiter is self.overdraft:
            self.overdraft = None
            self._choose_overdraft()

    def may_hold(self, waiter: Waiter, delta: int) -> bool:
        """The spent budget's answer to `waiter` having read `delta` more bytes while holding more
        than its free share: True while it is overdrawing for its frame (then it reads on), False
        when it must stop reading and `wait`."""
        if waiter is not self.overdraft:
            return False
        self._overdraft_left -= delta
        if self._overdraft_left > 0:
            return True
        self.overdraft = None  # its frame is in: it waits like the others, and another is chosen
        return False

    def wait(self, waiter: Waiter) -> None:
        """`waiter` stopped reading for the budget: told when it has room again, or may overdraw."""
        metrics.REQUEST_BYTES_WAITS.inc()
        self._waiting[waiter] = None
        self._choose_overdraft()

    def forget(self, waiter: Waiter) -> None:
        self._waiting.pop(waiter, None)
        if waiter is self.overdraft:
            self.overdraft = None
            self._choose_overdraft()

    def _choose_overdraft(self) -> None:
        if self.overdraft is not None or not self.spent:
            return
        lacking = [(waiter.missing, index, waiter) for index, waiter in enumerate(self._waiting)]
        lacking = [entry for entry in lacking if entry[0] > 0]
        if not lacking:
            return  # every waiter holds whole frames only: handling them frees the budget
        missing, _, chosen = min(lacking)
        del self._waiting[chosen]
        self.overdraft, self._overdraft_left = chosen, missing
        chosen.budget_freed()

    @property
    def waiting(self) -> int:
        return len(self._waiting)
