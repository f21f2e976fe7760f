"""Load scenarios. Each is bounded in time and in request count and returns plain numbers.

- `api_versions`, `create_topics`: set-up helpers over one connection;
- `throughput`: closed loop, `window` requests outstanding on each of `connections`, cycling over
  pre-encoded templates; optionally split over several processes;
- `join_consumers` / `join_classic`: bring model members to a stable group and return their
  steady-state heartbeat templates (for `throughput`);
- `ConsumerDriver`: open loop, every member heartbeats at its interval (scale, convergence, churn);
- `converge_consumer` / `converge_classic`: add members to a stable group and time the rebalance;
- `churn`: a KIP-848 join storm, then leaves and crashes.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import multiprocessing
import os
import random
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from .classic import ClassicMember
from .conn import Connection
from .consumer import ConsumerMember, error_name
from .stats import Recorder
from .wire import (
    API_VERSIONS,
    CONSUMER_GROUP_HEARTBEAT,
    CREATE_TOPICS,
    HEARTBEAT,
    OFFSET_COMMIT,
    Template,
    decode_response,
    member_uuid,
    offset_commit_v8_error,
    request,
)

HOST = "127.0.0.1"


# ---- set-up -----------------------------------------------------------------------------------

async def api_versions(port: int, host: str = HOST) -> dict[int, tuple[int, int]]:
    conn = await Connection.open(host, port)
    try:
        for version in (3, 0):
            payload = await asyncio.wait_for(conn.call(request(API_VERSIONS, version, {
                "client_software_name": "loadgen", "client_software_version": "1"})), 10)
            # An unsupported version is answered in v0 (KIP-511): error code right after the id.
            if payload[4:6] == b"\x00\x23":
                continue
            body = decode_response(API_VERSIONS, version, payload)
            if not body.error_code:
                return {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in body.api_keys}
        raise RuntimeError(f"ApiVersions failed: {body.error_code}")
    finally:
        conn.close()


async def create_topics(port: int, topics: dict[str, int], host: str = HOST) -> dict[str, uuid.UUID]:
    """Create topics (TOPIC_ALREADY_EXISTS is fine); returns name -> topic id."""
    conn = await Connection.open(host, port)
    try:
        payload = await asyncio.wait_for(conn.call(request(CREATE_TOPICS, 7, {
            "topics": [{"name": n, "num_partitions": p, "replication_factor": 1} for n, p in topics.items()],
            "timeout": 30_000, "validate_only": False})), 30)
        body = decode_response(CREATE_TOPICS, 7, payload)
        bad = {t.name: int(t.error_code) for t in body.topics if int(t.error_code) not in (0, 36)}
        if bad:
            raise RuntimeError(f"CreateTopics failed: {bad}")
        ids = {t.name: t.topic_id for t in body.topics}
        # Already existing topics come back without an id: ask Metadata.
        missing = [n for n, i in ids.items() if i is None or i.int == 0]
        if missing:
            payload = await conn.call(request(3, 12, {"topics": [{"name": n} for n in missing],
                                                      "allow_auto_topic_creation": False}))
            for t in decode_response(3, 12, payload).topics:
                ids[t.name] = t.topic_id
        return ids
    finally:
        conn.close()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (all its threads), seconds."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def server_rss(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak) of a process, bytes."""
    out = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(("VmRSS:", "VmHWM:")):
                key, value, _ = line.split()
                out[key.rstrip(":")] = int(value) * 1024
    return out


# ---- closed-loop throughput -------------------------------------------------------------------

def _error_at_9(payload: bytes) -> int:
    # Heartbeat v4 and ConsumerGroupHeartbeat v1: id(4) tags(1) throttle(4) error(2).
    return (payload[9] << 8) | payload[10]


CHECKS: dict[int, Callable[[bytes], int]] = {
    HEARTBEAT: _error_at_9, CONSUMER_GROUP_HEARTBEAT: _error_at_9, OFFSET_COMMIT: offset_commit_v8_error,
}


async def _closed_loop(host: str, targets: list[tuple[int, list[bytes], int]], api_key: int, api_version: int,
                       window: int, seconds: float, max_requests: int, warmup: float) -> Recorder:
    """A closed loop over several nodes at once: `targets` = (port, request frames, connections),
    `window` requests outstanding per connection, until `seconds` or `max_requests`."""
    rec = Recorder()
    check = CHECKS[api_key]
    budget = [max_requests]
    stop = [False]
    conns: list[Connection] = []

    def pump(conn: Connection, share: list[Template]) -> None:
        index = [0]

        def on_response(payload: bytes, latency: int) -> None:
            if latency < 0:
                return
            code = check(payload)
            if code:
                rec.error(error_name(code), latency)
            else:
                rec.ok(latency)
            send()

        def send() -> None:
            if stop[0] or budget[0] <= 0:
                return
            budget[0] -= 1
            i = index[0]
            index[0] = i + 1 if i + 1 < len(share) else 0
            conn.send(share[i], on_response)

        for _ in range(window):
            send()

    for port, raw, count in targets:
        for c in range(count):
            conn = await Connection.open(host, port)
            conns.append(conn)
            share = raw[c::count] or [raw[c % len(raw)]]
            pump(conn, [Template(api_key, api_version, t) for t in share])
    deadline = time.perf_counter() + seconds
    await asyncio.sleep(warmup)
    rec.start()
    while time.perf_counter() < deadline and budget[0] > 0:
        await asyncio.sleep(0.05)
    rec.stop()
    stop[0] = True
    await asyncio.sleep(0.05)
    for conn in conns:
        conn.close()
    return rec


def _worker(args: tuple[Any, ...]) -> Recorder:
    import uvloop

    return uvloop.run(_closed_loop(*args))


async def throughput(port: int, templates: Iterable[Template], *, connections: int = 16, window: int = 16,
                     seconds: float = 5.0, max_requests: int = 5_000_000, warmup: float = 0.5,
                     processes: int = 1) -> dict[str, Any]:
    """Requests/s and latency of a closed loop over the templates (one API/version)."""
    templates = list(templates)
    api_key, api_version = templates[0].api_key, templates[0].api_version
    raw = [t.data for t in templates]
    if processes <= 1:
        rec = await _closed_loop(HOST, [(port, raw, connections)], api_key, api_version, window, seconds,
                                 max_requests, warmup)
    else:
        per = max(connections // processes, 1)
        jobs = [(HOST, [(port, raw[i::processes], per)], api_key, api_version, window, seconds,
                 max_requests // processes, warmup) for i in range(processes)]
        ctx = multiprocessing.get_context("spawn")
        loop = asyncio.get_running_loop()
        with ctx.Pool(processes) as pool:
            parts = await loop.run_in_executor(None, pool.map, _worker, jobs)
        rec = Recorder()
        for part in parts:
            rec.merge(part)
        rec.requests = sum(p.requests for p in parts)
        rec.started = min(p.started for p in parts)
        rec.stopped = max(p.stopped for p in parts)
    return rec.summary()


def synthetic_heartbeats(members: int) -> list[Template]:
    """Heartbeat v4 templates for servers with no group state (reference servers)."""
    return [request(HEARTBEAT, 4, {"group_id": f"g{i // 10}", "generation_id": 1, "member_id": member_uuid(i)})
            for i in range(members)]


def synthetic_consumer_heartbeats(members: int) -> list[Template]:
    return [ConsumerMember(f"g{i // 10}", member_uuid(i), ["t"])._encode({"member_epoch": 1, "topic_partitions": None})
            for i in range(members)]


def commit_templates(groups: int, topic: str = "commits") -> list[Template]:
    """OffsetCommit v8 simple commits (generation -1, no member), one partition each."""
    return [request(OFFSET_COMMIT, 8, {
        "group_id": f"commit-{g}", "generation_id_or_member_epoch": -1, "member_id": "",
        "group_instance_id": None, "topics": [{"name": topic, "partitions": [
            {"partition_index": g % 8, "committed_offset": 1000 + g, "committed_leader_epoch": -1,
             "committed_metadata": ""}]}]}) for g in range(groups)]


# ---- KIP-848 open loop ------------------------------------------------------------------------

class ConsumerDriver:
    """Every member heartbeats at its interval (first one at a random offset within `spread_s`),
    at once after an assignment (to acknowledge it), never two at a time.

    The interval runs from the SEND of the previous heartbeat, as in the Java client 4.x
    (`AbstractHeartbeatRequestManager.makeHeartbeatRequest` resets the heartbeat timer when it
    builds the request; the next one goes when the timer has expired and no request is in flight).
    So a slow response does not shift a member's phase unless it takes longer than the interval,
    and members that joined spread out stay spread out."""

    def __init__(self, conns: list[Connection], recorder: Recorder, seed: int = 1) -> None:
        self.conns = conns
        self.recorder = recorder
        self.loop = asyncio.get_running_loop()
        self.members: list[ConsumerMember] = []
        self._handles: dict[int, asyncio.Handle] = {}
        self._stopped: set[int] = set()
        self._random = random.Random(seed)
        self.sent = 0
        self.last_change = time.perf_counter()

    def add(self, members: Iterable[ConsumerMember], spread_s: float = 0.0) -> None:
        for member in members:
            index = len(self.members)
            self.members.append(member)
            delay = self._random.random() * spread_s if spread_s else 0.0
            self._handles[index] = self.loop.call_later(delay, self._send, index)

    def _send(self, index: int) -> None:
        if index in self._stopped:
            return
        member = self.members[index]
        conn = self.conns[index % len(self.conns)]
        epoch, acked = member.epoch, member.acked
        self.sent += 1
        loop = self.loop
        next_at = loop.time() + member.interval_ms / 1000  # the heartbeat timer, reset at send

        def on_response(payload: bytes, latency: int) -> None:
            if latency < 0 or index in self._stopped:
                return
            code = member.on_response(payload)
            if code:
                self.recorder.error(error_name(code), latency)
            else:
                self.recorder.ok(latency)
            now_ack = member.wants_heartbeat_now
            if now_ack or member.epoch != epoch or member.acked != acked:
                self.last_change = time.perf_counter()
            if member.left:
                self._stopped.add(index)
                return
            if now_ack:
                self._handles[index] = loop.call_soon(self._send, index)
            elif code:
                self._handles[index] = loop.call_later(0.05, self._send, index)
            else:
                self._handles[index] = loop.call_at(max(next_at, loop.time()), self._send, index)

        conn.send(member.template(), on_response)

    def leave(self, index: int) -> None:
        self.members[index].left = True
        handle = self._handles.pop(index, None)
        if handle is not None:
            handle.cancel()
        self._send(index)

    def crash(self, index: int) -> None:
        self._stopped.add(index)
        handle = self._handles.pop(index, None)
        if handle is not None:
            handle.cancel()

    def stop(self) -> None:
        for index in list(self._handles):
            self.crash(index)

    def live(self) -> list[ConsumerMember]:
        return [m for i, m in enumerate(self.members) if i not in self._stopped]


def consumer_balanced(members: list[ConsumerMember], partitions: int) -> bool:
    """Every partition owned once, every member at floor/ceil of the fair share, all acknowledged."""
    if not members:
        return False
    base, extra = divmod(partitions, len(members))
    total = 0
    seen: set[tuple[uuid.UUID, int]] = set()
    for m in members:
        if m.epoch <= 0 or not m.acked:
            return False
        n = m.partition_count()
        if n not in (base, base + 1) or (extra == 0 and n != base):
            return False
        total += n
        seen.update((t, p) for t, parts in m.owned.items() for p in parts)
    return total == partitions and len(seen) == partitions


def groups_balanced(members: list[ConsumerMember], partitions: int) -> bool:
    """`consumer_balanced` for every group (each group subscribed to `partitions` partitions)."""
    by_group: dict[str, list[ConsumerMember]] = {}
    for m in members:
        by_group.setdefault(m.group_id, []).append(m)
    return all(consumer_balanced(group, partitions) for group in by_group.values())


async def wait_for(predicate: Callable[[], bool], timeout: float, poll: float = 0.002) -> float | None:
    """Seconds until `predicate()` held (polled), or None on timeout."""
    start = time.perf_counter()
    while time.perf_counter() - start < timeout:
        if predicate():
            return time.perf_counter() - start
        await asyncio.sleep(poll)
    return None


async def join_consumers(port: int, groups: int, per_group: int, topic: str, partitions: int, *,
                         connections: int = 16, timeout: float = 120.0, regex: str | None = None
                         ) -> tuple[list[ConsumerMember], Recorder]:
    """Join members through the heartbeat protocol until every group is balanced; stop heartbeating."""
    conns = [await Connection.open(HOST, port) for _ in range(connections)]
    rec = Recorder()
    driver = ConsumerDriver(conns, rec)
    driver.add(ConsumerMember(f"g{i // per_group}", member_uuid(i), [topic], regex=regex)
               for i in range(groups * per_group))
    settled = await wait_for(lambda: groups_balanced(driver.members, partitions), timeout, 0.05) is not None
    driver.stop()
    await asyncio.sleep(0.2)
    for conn in conns:
        conn.close()
    if not settled:
        raise RuntimeError("consumer group members did not settle")
    return driver.members, rec


async def join_classic(port: int, groups: int, per_group: int, topics: dict[str, int], *, interval_ms: int = 1000,
                       parallel_groups: int = 10, timeout: float = 120.0, join_version: int = 9,
                       sync_version: int = 5) -> list[Template]:
    """Join classic members (a connection each, `parallel_groups` groups at a time) and return their
    Heartbeat v4 templates; the members stop heartbeating themselves."""
    templates: list[Template] = []
    deadline = time.perf_counter() + timeout
    for first in range(0, groups, parallel_groups):
        batch = range(first, min(first + parallel_groups, groups))
        conns = [await Connection.open(HOST, port) for _ in range(len(batch) * per_group)]
        members = [ClassicMember(conns[i], f"c{g}", topics, cooperative=False, interval_ms=interval_ms,
                                 join_version=join_version, sync_version=sync_version)
                   for i, g in enumerate(g for g in batch for _ in range(per_group))]
        tasks = [asyncio.create_task(m.run()) for m in members]

        def settled(members: list[ClassicMember] = members, groups_in_batch: int = len(batch)) -> bool:
            gens = {(m.group_id, m.generation) for m in members}
            return all(m.stable for m in members) and len(gens) == groups_in_batch

        if await wait_for(settled, deadline - time.perf_counter(), 0.01) is None:
            raise RuntimeError("classic members did not settle")
        for m in members:
            m.stop()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for conn in conns:
            conn.close()
        templates += [request(HEARTBEAT, 4, {"group_id": m.group_id, "generation_id": m.generation,
                                             "member_id": m.member_id}) for m in members]
    return templates


# ---- convergence ------------------------------------------------------------------------------

async def converge_consumer(port: int, members: int, added: int, topic: str, partitions: int, *,
                            connections: int = 8, timeout: float = 60.0) -> dict[str, Any]:
    conns = [await Connection.open(HOST, port) for _ in range(connections)]
    rec = Recorder()
    driver = ConsumerDriver(conns, rec, seed=7)
    group = f"conv-{uuid.uuid4().hex[:8]}"
    driver.add((ConsumerMember(group, member_uuid(10_000 + i), [topic]) for i in range(members)), spread_s=0.2)
    try:
        if await wait_for(lambda: consumer_balanced(driver.live(), partitions), timeout, 0.01) is None:
            raise RuntimeError("initial group did not balance")
        await asyncio.sleep(0.5)  # let heartbeat phases spread out again
        interval = driver.members[0].interval_ms
        rec.start()
        driver.add(ConsumerMember(group, member_uuid(20_000 + i), [topic]) for i in range(added))
        took = await wait_for(lambda: consumer_balanced(driver.live(), partitions), timeout)
        rec.stop()
        return {"seconds": took, "interval_ms": interval, "requests": rec.requests, "errors": dict(rec.errors)}
    finally:
        driver.stop()
        for conn in conns:
            conn.close()


def classic_balanced(members: list[ClassicMember], partitions: int) -> bool:
    base, extra = divmod(partitions, len(members))
    seen: set[tuple[str, int]] = set()
    total = 0
    gens = set()
    for m in members:
        if not m.stable:
            return False
        gens.add(m.generation)
        n = m.partition_count()
        if n not in (base, base + 1) or (extra == 0 and n != base):
            return False
        total += n
        seen.update((t, p) for t, parts in m.owned.items() for p in parts)
    return total == partitions and len(seen) == partitions and len(gens) == 1


async def converge_classic(port: int, members: int, added: int, topic: str, partitions: int, *,
                           cooperative: bool, interval_ms: int, timeout: float = 60.0) -> dict[str, Any]:
    group = f"conv-{'coop' if cooperative else 'eager'}-{uuid.uuid4().hex[:8]}"
    crowd: list[ClassicMember] = []
    tasks: list[asyncio.Task[None]] = []

    async def add(n: int) -> None:
        for _ in range(n):
            conn = await Connection.open(HOST, port)
            member = ClassicMember(conn, group, {topic: partitions}, cooperative=cooperative, interval_ms=interval_ms)
            crowd.append(member)
            tasks.append(asyncio.create_task(member.run()))

    try:
        await add(members)
        if await wait_for(lambda: classic_balanced(crowd, partitions), timeout, 0.01) is None:
            raise RuntimeError("initial classic group did not balance")
        await asyncio.sleep(interval_ms / 1000 * 1.5)
        rebalances = sum(m.rebalances for m in crowd)
        started = time.perf_counter()
        await add(added)
        took = await wait_for(lambda: classic_balanced(crowd, partitions), timeout)
        if took is not None:
            took = time.perf_counter() - started
        return {"seconds": took, "interval_ms": interval_ms,
                "syncs": sum(m.rebalances for m in crowd) - rebalances}
    finally:
        for m in crowd:
            m.stop()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for m in crowd:
            m.conn.close()


# ---- scale and churn --------------------------------------------------------------------------

async def scale(port: int, pid: int | None, members: int, groups: int, topic: str, partitions: int, *,
                join_s: float, measure_s: float, connections: int = 64, settle_timeout: float = 180.0
                ) -> dict[str, Any]:
    """`members` KIP-848 members in `groups` groups join over `join_s`, settle, then heartbeat for
    `measure_s` while latencies are recorded."""
    conns = [await Connection.open(HOST, port) for _ in range(connections)]
    rec = Recorder()
    driver = ConsumerDriver(conns, rec, seed=3)
    per_group = max(members // groups, 1)
    me = os.getpid()
    cpu0 = (cpu_seconds(pid) if pid else 0.0, cpu_seconds(me))
    started = time.perf_counter()
    # The load generator's own collections (full ones of 200-400 ms, young ones of 40-70 ms at
    # 20,000 members) would land in the measured latencies; its garbage is acyclic, so it runs
    # the scenario on reference counting alone.
    gc.collect()
    gc.disable()
    try:
        driver.add((ConsumerMember(f"scale-{i // per_group}", member_uuid(i), [topic]) for i in range(members)),
                   spread_s=join_s)
        # Checking every member costs the load generator ~2 us each: poll twice a second.
        settled = await wait_for(lambda: groups_balanced(driver.members, partitions), settle_timeout,
                                 0.5) is not None
        joined_s = time.perf_counter() - started
        rss_before = server_rss(pid) if pid else {}
        cpu1 = (cpu_seconds(pid) if pid else 0.0, cpu_seconds(me))
        rec.start()
        await asyncio.sleep(measure_s)
        rec.stop()
        cpu2 = (cpu_seconds(pid) if pid else 0.0, cpu_seconds(me))
        rss = server_rss(pid) if pid else {}
        driver.stop()
        for conn in conns:
            conn.close()
    finally:
        gc.enable()
    window = max(rec.stopped - rec.started, 1e-9)
    return {**rec.summary(), "settled": settled, "join_and_settle_s": joined_s, "rss_settled": rss_before.get("VmRSS"),
            "rss": rss.get("VmRSS"), "rss_peak": rss.get("VmHWM"),
            # CPU share of one core (100 = one core busy), server and this load generator.
            "server_cpu_join": (cpu1[0] - cpu0[0]) / joined_s * 100, "loadgen_cpu_join": (cpu1[1] - cpu0[1]) / joined_s * 100,
            "server_cpu": (cpu2[0] - cpu1[0]) / window * 100, "loadgen_cpu": (cpu2[1] - cpu1[1]) / window * 100}


async def churn(port: int, members: int, groups: int, topic: str, partitions: int, *, leave: int, crash: int,
                connections: int = 16, timeout: float = 120.0) -> dict[str, Any]:
    """Join storm (every member at once), then `leave` members leave and `crash` members stop
    heartbeating; times until each phase settles (crashed members are fenced by session timeout)."""
    conns = [await Connection.open(HOST, port) for _ in range(connections)]
    rec = Recorder()
    driver = ConsumerDriver(conns, rec, seed=5)
    per_group = max(members // groups, 1)
    rec.start()
    driver.add(ConsumerMember(f"churn-{i // per_group}", member_uuid(50_000 + i), [topic]) for i in range(members))
    storm_took = await wait_for(lambda: groups_balanced(driver.live(), partitions), timeout, 0.01)
    storm_s = storm_took if storm_took is not None else float("nan")
    t1 = time.perf_counter()
    # Spread over every group: member k*step leaves, member k*step + step//2 crashes.
    step = max(members // max(leave, crash, 1), 2)
    for i in range(leave):
        driver.leave((i * step) % members)
    for i in range(crash):
        driver.crash((i * step + step // 2) % members)
    after = await wait_for(lambda: groups_balanced(driver.live(), partitions), timeout, 0.01)
    after_s = time.perf_counter() - t1 if after is not None else float("nan")
    rec.stop()
    driver.stop()
    for conn in conns:
        conn.close()
    return {**rec.summary(), "storm_s": storm_s, "leave_crash_settle_s": after_s}


async def close_quietly(conns: list[Connection]) -> None:
    for conn in conns:
        with contextlib.suppress(Exception):
            conn.close()
