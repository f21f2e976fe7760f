"""Hostile connections against the server's memory (issue 32, point 2): hundreds of connections
claim 100 MB frames on a PLAINTEXT listener and trickle their bytes. The server process's RSS stays
bounded (the claims cost nothing, what arrives is bounded by `queued.max.request.bytes`) while a
real consumer group on the embedded data plane forms, consumes, commits and rebalances meanwhile."""

from __future__ import annotations

import contextlib
import errno
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import psutil
from confluent_kafka import TopicPartition

from tests.support.clients import make_member, owns_each_exactly_once, poll_until, produce
from tests.support.metrics import scrape
from tests.support.server import ServerProcess, wait_until

CLAIM = 100_000_000  # under socket.request.max.bytes (104857600): a frame the server must accept
MB = 1024 * 1024
RSS_LIMIT = 300 * MB
TOPIC = "work"
PARTITIONS = 4
MESSAGES = 200
_HELD_BACK = 100
"""Rounds in a row a socket may refuse more bytes before its trickle counts as held back (done)."""


@dataclass
class Tricklers:
    """Connections from 127.0.0.2 that each claim a `CLAIM`-byte frame, then send `each` bytes of
    it `piece` bytes at a time, round after round, skipping a connection whose socket is full (done
    when every one has sent its bytes or been held back). Samples the server's RSS every round."""

    port: int
    server_pid: int
    count: int
    each: int
    piece: int = 8 * 1024
    sent: int = 0
    peak_rss: int = 0
    refused: int = 0
    error: BaseException | None = None
    stop: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        sockets: list[socket.socket] = []
        process = psutil.Process(self.server_pid)
        try:
            for _ in range(self.count):
                s = socket.create_connection(("127.0.0.1", self.port), source_address=("127.0.0.2", 0))
                s.sendall(struct.pack(">ihhi", CLAIM, 3, 12, 1))  # a Metadata v12 header: a plausible start
                s.setblocking(False)
                sockets.append(s)
            left = [self.each] * len(sockets)
            blocked = [0] * len(sockets)
            piece = b"\0" * self.piece
            while not self.stop.is_set() and any(n and b < _HELD_BACK for n, b in zip(left, blocked, strict=True)):
                for i, s in enumerate(sockets):
                    if not left[i]:
                        continue
                    try:
                        n = s.send(piece[:min(self.piece, left[i])])
                    except BlockingIOError:
                        blocked[i] += 1  # the server stopped reading it and the kernel's buffers are full
                        continue
                    except OSError as exc:
                        if exc.errno not in (errno.ECONNRESET, errno.EPIPE):
                            raise
                        self.refused += 1
                        left[i] = 0
                        continue
                    blocked[i] = 0
                    left[i] -= n
                    self.sent += n
                self.peak_rss = max(self.peak_rss, process.memory_info().rss)
                time.sleep(0.01)  # pacing: a trickle, not a flood
            self.done.set()
            while not self.stop.wait(0.05):  # hold the connections (and what they sent) open
                self.peak_rss = max(self.peak_rss, process.memory_info().rss)
        except BaseException as exc:  # reported by the test
            self.error = exc
            self.done.set()
        finally:
            for s in sockets:
                s.close()


def _group_works_meanwhile(server: ServerProcess, tricklers: Tricklers, group: str) -> None:
    """Two members form a group over the topic and consume it, commit, and a third joins: every
    step a real client waits on while the tricklers hold their connections."""
    produce(server.bootstrap, TOPIC, MESSAGES, PARTITIONS)
    members = [make_member(server.bootstrap, group, f"m{i}", [TOPIC]) for i in range(2)]
    try:
        poll_until(members, lambda: sum(len(m.consumed) for m in members) >= MESSAGES and
                   owns_each_exactly_once(members, PARTITIONS), timeout=60, message="two members to consume all")
        ends = [TopicPartition(TOPIC, p, MESSAGES // PARTITIONS) for p in range(PARTITIONS)]
        members[0].consumer.commit(offsets=ends, asynchronous=False)
        members.append(make_member(server.bootstrap, group, "m2", [TOPIC]))
        poll_until(members, lambda: owns_each_exactly_once(members, PARTITIONS), timeout=60,
                   message="the third member to get partitions")
        committed = members[2].consumer.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=10)
        assert [tp.offset for tp in committed] == [MESSAGES // PARTITIONS] * PARTITIONS
    finally:
        for member in members:
            member.close()
    assert tricklers.error is None, tricklers.error


def _run(tmp_path, count: int, each: int,
         settled: Callable[[dict[str, float]], bool]) -> tuple[Tricklers, dict[str, float], int]:
    """Start a server, the tricklers and the group; once the tricklers have sent everything, the
    server's metrics when `settled(metrics)` holds; and the group works again."""
    server = ServerProcess(tmp_path / "data", overrides={"topics": f"{TOPIC}:{PARTITIONS}"})
    server.start()
    try:
        assert server.proc is not None
        baseline = psutil.Process(server.proc.pid).memory_info().rss
        tricklers = Tricklers(server.port, server.proc.pid, count, each)
        thread = threading.Thread(target=tricklers.run, name="tricklers", daemon=True)
        thread.start()
        try:
            wait_until(lambda: scrape(server.metrics_port).get("coordinator_connections_open", 0) >= count,
                       timeout=30, message="every trickler connected")
            _group_works_meanwhile(server, tricklers, "steady")
            assert tricklers.done.wait(60), "the tricklers did not finish"
            assert tricklers.error is None, tricklers.error
            metrics = wait_until(lambda: (m := scrape(server.metrics_port)) and settled(m) and m,
                                 timeout=30, message="the server to have read what it will read")
            _group_works_meanwhile(server, tricklers, "after")  # still, with every byte sent held
        finally:
            tricklers.stop.set()
            thread.join(30)
        with contextlib.suppress(psutil.NoSuchProcess):
            tricklers.peak_rss = max(tricklers.peak_rss, psutil.Process(server.proc.pid).memory_info().rss)
        return tricklers, metrics, baseline
    finally:
        server.stop()


def test_500_connections_claiming_100_mb_frames_leave_rss_under_300_mb_while_a_group_works(tmp_path) -> None:
    """500 × 400 kB trickled (50 GB claimed, 200 MB sent: twice the default budget of 100 MiB); about
    8 s here (peak RSS 200 MB from a 52 MB baseline; 396 MB with queued.max.request.bytes=-1)."""
    tricklers, metrics, baseline = _run(tmp_path, count=500, each=400 * 1024,
                                        settled=lambda m: m["coordinator_request_bytes_waits_total"] > 0)
    assert tricklers.refused == 0
    assert tricklers.sent > 100 * MB  # more than the budget (195 MB here: the kernel's buffers took the rest)
    assert metrics["coordinator_request_bytes_waits_total"] > 0  # the budget was spent: connections waited
    assert metrics["coordinator_request_bytes_held"] <= 100 * MB + CLAIM + 500 * (16 * 1024 + 512)
    assert tricklers.peak_rss < RSS_LIMIT, f"RSS {tricklers.peak_rss / MB:.0f} MB (baseline {baseline / MB:.0f} MB)"
