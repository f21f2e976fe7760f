"""Share groups against a plain consumer group reading the same records (issue 30 point 6).

    .venv/bin/python -m bench.share_bench [--records 200000] [--rounds 3] [--profile DIR]

One embedded server (``log.flush.policy=always``: every record-log entry fsynced before its
answer, the default), a topic of 1 partition and one of 2, each holding ``--records`` small
records (100 bytes, produced by librdkafka with Kafka's default ``batch.size`` of 16 KB, so
batches of ~140 records as a Java or librdkafka producer writes them). Then, alternating the
order in every round, each of these reads all the records of a topic and is timed from its first
request to the answer that confirms the last record:

- **plain**: one consumer of a consumer group: Fetch v12 from offset 0 (1 MB per partition),
  the position committed every 5 s and at the end (the clients' auto-commit);
- **share ×1**: one member of a fresh share group: ShareFetch v2, ``MaxRecords`` 500 (the clients'
  ``max.poll.records``), each fetch acknowledging (ACCEPT) what the previous one acquired,
  piggy-backed, as the clients do; done when every record is acknowledged;
- **share ×4**: four members of a fresh share group, each on its own connection, on the same
  partition(s), concurrently.

The load generator is this process, raw requests over ``bench/loadgen``'s pipelined connection:
one asyncio loop for all the members, no record decoded (a plain fetch reads batch headers, a
share fetch the acquired ranges), so the server, not the client, is the bottleneck (its CPU is
reported beside the server's). Reported per run: records/s, server CPU per record (user + system
of the server process over the run), load generator CPU, the load average.

``--only`` also takes the same three read by the clients users run (``CLIENT_KINDS``):
confluent-kafka's ``Consumer`` (auto-commit) and ``ShareConsumer`` (implicit acknowledgement), one
process per consumer, timed from the first record handed to the application to the last; there
the clients' own per-record work is part of what is measured.

``--shards N`` runs the server with ``coordinator.shards=N`` (the supervisor starts the shard
processes; every reader bootstraps at shard 0, every partition's leader) and counts as server CPU
the supervisor's and every shard process's together (each one's part is printed beside it). ``--group-shard K`` names every group after
the first id the server's own placement puts on shard K: a share group on shard K >= 1 has its
ShareFetch and ShareAcknowledge forwarded by shard 0 to shard K, which reads the records back
from shard 0 (the raw members send their ShareGroupHeartbeat to shard K, their coordinator).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.loadgen.conn import Connection
from bench.loadgen.scenarios import cpu_seconds, create_topics
from bench.loadgen.wire import decode_response, member_uuid, request
from coordinator.shards.placement import DEFAULT_PARTITIONS, ShardLayout
from tests.support.server import ServerProcess, free_port_block

HOST = "127.0.0.1"
FETCH, OFFSET_COMMIT, SHARE_GROUP_HEARTBEAT, SHARE_FETCH, SHARE_ACKNOWLEDGE = 1, 8, 76, 78, 79
ACCEPT = 1
MAX_RECORDS = 500
VALUE = b"v" * 100
_BATCH_HEAD = struct.Struct(">qi")  # base offset, batch length
_LAST_DELTA = struct.Struct(">i")  # at byte 23 of a batch


@dataclass
class Run:
    kind: str
    topic: str
    records: int
    seconds: float
    server_cpu_s: float
    loadgen_cpu_s: float
    load: float
    requests: int = 0
    empty: int = 0
    """Share fetches that acquired nothing."""
    process_cpu_s: tuple[float, ...] = ()
    """With several server processes: each one's share of ``server_cpu_s`` (supervisor, shard 0, ...)."""

    @property
    def rps(self) -> float:
        return self.records / self.seconds

    @property
    def cpu_us_per_record(self) -> float:
        return self.server_cpu_s / self.records * 1e6


# ---- the server and its records ----------------------------------------------------------------

@contextlib.contextmanager
def server(workdir: Path, overrides: dict[str, str] | None = None, shards: int = 1) -> Iterator[ServerProcess]:
    """One embedded server; with ``shards`` > 1 a supervisor whose shard k listens on port + k."""
    sharded = {"coordinator.shards": str(shards)} if shards > 1 else {}
    proc = ServerProcess(workdir / "data", port=free_port_block(shards) if shards > 1 else None,
                         overrides={"share.auto.offset.reset": "earliest", "log.flush.policy": "always",
                                    **sharded, **(overrides or {})})
    proc.data_dir.parent.mkdir(parents=True, exist_ok=True)
    try:
        yield proc.start()
    finally:
        proc.stop()


def server_pids(pid: int) -> tuple[int, ...]:
    """``pid`` and its children: a supervisor's shard processes (none for a one-shard server)."""
    children = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue  # gone meanwhile
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                children.append(int(entry.name))
    return (pid, *sorted(children))


def group_id(name: str, layout: ShardLayout, shard: int | None) -> str:
    """``name``, or with ``shard`` the first ``name-N`` the server's placement puts on that shard."""
    if shard is None:
        return name
    return next(g for n in range(10_000) if layout.shard_of_group(g := f"{name}-{n}") == shard)


def produce(port: int, topic: str, partitions: int, count: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": f"{HOST}:{port}", "linger.ms": 20, "batch.size": 16384,
                         "compression.type": "none", "enable.idempotence": False, "acks": "all"})
    for i in range(count):
        while True:
            try:
                producer.produce(topic, VALUE, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(60) != 0:
        raise RuntimeError(f"{topic}: records left unsent")


def batch_ends(records: bytes) -> Iterator[tuple[int, int]]:
    """(base offset, last offset) of each whole batch of a Fetch's ``Records``, headers only."""
    pos, end = 0, len(records)
    while pos + 27 <= end:
        base, length = _BATCH_HEAD.unpack_from(records, pos)
        if pos + 12 + length > end:
            return
        (delta,) = _LAST_DELTA.unpack_from(records, pos + 23)
        yield base, base + delta
        pos += 12 + length


# ---- plain consumer --------------------------------------------------------------------------

async def plain(port: int, topic: str, partitions: int, total: int, group: str,
                coordinator: int | None = None) -> tuple[int, int]:
    """Read every record of ``topic`` with Fetch v12, committing to the group's ``coordinator`` port
    (default ``port``); (records, requests)."""
    conn = await Connection.open(HOST, port)
    committer = conn if coordinator in (None, port) else await Connection.open(HOST, coordinator)
    try:
        position = dict.fromkeys(range(partitions), 0)
        seen = requests = 0
        last_commit = time.perf_counter()

        async def commit() -> None:
            body = decode_response(OFFSET_COMMIT, 8, await committer.call(request(OFFSET_COMMIT, 8, {
                "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
                "topics": [{"name": topic, "partitions": [
                    {"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1,
                     "committed_metadata": None} for p, o in position.items()]}]})))
            codes = {int(p.error_code) for t in body.topics for p in t.partitions}
            if codes != {0}:
                raise RuntimeError(f"OffsetCommit: {codes}")

        while seen < total:
            body = decode_response(FETCH, 12, await conn.call(request(FETCH, 12, {
                "cluster_id": None, "replica_id": -1, "max_wait": 500, "min_bytes": 1, "max_bytes": 50 << 20,
                "isolation_level": 0, "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
                "topics": [{"topic": topic, "partitions": [
                    {"partition": p, "current_leader_epoch": -1, "fetch_offset": o, "last_fetched_epoch": -1,
                     "log_start_offset": -1, "partition_max_bytes": 1 << 20} for p, o in position.items()]}]})))
            requests += 1
            for t in body.responses:
                for part in t.partitions:
                    if part.error_code:
                        raise RuntimeError(f"Fetch: error {part.error_code}")
                    for base, last in batch_ends(part.records or b""):
                        if last >= position[part.partition_index]:
                            seen += last + 1 - max(base, position[part.partition_index])
                            position[part.partition_index] = last + 1
            if time.perf_counter() - last_commit >= 5.0:
                await commit()
                last_commit = time.perf_counter()
        await commit()
        return seen, requests
    finally:
        conn.close()
        if committer is not conn:
            committer.close()


# ---- share members ---------------------------------------------------------------------------

class ShareMember:
    def __init__(self, conn: Connection, group: str, member_id: str, topic: str,
                 coordinator: Connection | None = None) -> None:
        """``conn`` reaches the partitions' leader; ``coordinator`` the group's coordinator, if elsewhere."""
        self.conn = conn
        self.coordinator = coordinator or conn
        self.group = group
        self.member_id = member_id
        self.topic = topic
        self.topic_id: Any = None
        self.partitions: list[int] = []
        self.epoch = 0
        self.requests = 0
        self.empty = 0
        """Fetches that acquired nothing (the partition's in-flight limit, or the others took the rest)."""

    async def heartbeat(self, epoch: int) -> None:
        body = decode_response(SHARE_GROUP_HEARTBEAT, 1, await self.coordinator.call(request(SHARE_GROUP_HEARTBEAT, 1, {
            "group_id": self.group, "member_id": self.member_id, "member_epoch": epoch, "rack_id": None,
            "subscribed_topic_names": [self.topic] if epoch == 0 else None})))
        if body.error_code:
            raise RuntimeError(f"ShareGroupHeartbeat: {body.error_code} {body.error_message}")
        self.epoch = int(body.member_epoch)
        if body.assignment is not None:
            for tp in body.assignment.topic_partitions:
                self.topic_id, self.partitions = tp.topic_id, sorted(int(p) for p in tp.partitions)

    def _fetch(self, epoch: int, acks: dict[int, list[tuple[int, int]]], final: bool = False) -> Any:
        parts = self.partitions if epoch == 0 else sorted(acks)
        topics = [{"topic_id": self.topic_id, "partitions": [
            {"partition_index": p, "acknowledgement_batches": [
                {"first_offset": f, "last_offset": last, "acknowledge_types": [ACCEPT]} for f, last in acks.get(p, [])]}
            for p in parts]}] if parts else []
        if final:
            return request(SHARE_ACKNOWLEDGE, 2, {"group_id": self.group, "member_id": self.member_id,
                                                  "share_session_epoch": epoch, "is_renew_ack": False,
                                                  "topics": topics})
        return request(SHARE_FETCH, 2, {
            "group_id": self.group, "member_id": self.member_id, "share_session_epoch": epoch, "max_wait": 500,
            "min_bytes": 1, "max_bytes": 50 << 20, "max_records": MAX_RECORDS, "batch_size": MAX_RECORDS,
            "share_acquire_mode": 0, "is_renew_ack": False, "topics": topics, "forgotten_topics_data": []})

    async def consume(self, done: list[int], total: int, finished: asyncio.Event) -> None:
        """Fetch, acknowledging the previous fetch's records with the next, until ``total`` records
        (all members together, ``done[0]``) are acknowledged."""
        acks: dict[int, list[tuple[int, int]]] = {}
        epoch = 0
        while not finished.is_set():
            api = SHARE_FETCH
            body = decode_response(api, 2, await self.conn.call(self._fetch(epoch, acks)))
            self.requests += 1
            if body.error_code:
                raise RuntimeError(f"ShareFetch: {body.error_code} {body.error_message}")
            epoch = epoch + 1 if epoch < 0x7FFFFFFF else 1
            sent, acks = acks, {}
            got = 0
            for t in body.responses:
                for part in t.partitions:
                    if part.error_code:
                        raise RuntimeError(f"ShareFetch partition: {part.error_code} {part.error_message}")
                    index = int(part.partition_index)
                    if index in sent:
                        if part.acknowledge_error_code:
                            raise RuntimeError(f"acknowledgement refused: {part.acknowledge_error_code} "
                                               f"{part.acknowledge_error_message}")
                        done[0] += sum(last - first + 1 for first, last in sent[index])
                    ranges = [(int(a.first_offset), int(a.last_offset)) for a in part.acquired_records]
                    if ranges:
                        acks[index] = ranges
                        got += 1
            self.empty += not got
            if done[0] >= total:
                finished.set()
                return


async def share(port: int, topic: str, total: int, group: str, members: int,
                coordinator: int | None = None) -> tuple[int, int, float, int]:
    """``members`` members of a fresh share group read ``topic`` to the end, heartbeating to the
    group's ``coordinator`` port (default ``port``); (records, requests, seconds, fetches that
    acquired nothing)."""
    conns = [await Connection.open(HOST, port) for _ in range(members)]
    beats = ([] if coordinator in (None, port)
             else [await Connection.open(HOST, coordinator) for _ in range(members)])
    try:
        group_members = [ShareMember(c, group, member_uuid(i), topic, beats[i] if beats else None)
                         for i, c in enumerate(conns)]
        for m in group_members:
            await m.heartbeat(0)
        for m in group_members:  # every member's assignment after the last join
            await m.heartbeat(m.epoch)
        deadline = time.perf_counter() + 30
        while any(not m.partitions for m in group_members):  # a coordinator may assign a beat later
            if time.perf_counter() > deadline:
                raise RuntimeError(f"{group}: no assignment after 30 s of heartbeats")
            await asyncio.sleep(0.05)
            for m in group_members:
                await m.heartbeat(m.epoch)
        done, finished = [0], asyncio.Event()
        started = time.perf_counter()
        tasks = [asyncio.ensure_future(m.consume(done, total, finished)) for m in group_members]
        waiter = asyncio.ensure_future(finished.wait())
        await asyncio.wait([waiter, *tasks], return_when=asyncio.FIRST_COMPLETED, timeout=600)
        seconds = time.perf_counter() - started
        for task in tasks:
            if task.done() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]
            task.cancel()
        waiter.cancel()
        if done[0] < total:
            raise RuntimeError(f"only {done[0]} of {total} records acknowledged in 600 s")
        return done[0], sum(m.requests for m in group_members), seconds, sum(m.empty for m in group_members)
    finally:
        for c in conns + beats:
            c.close()


# ---- the clients users run ---------------------------------------------------------------------

def _client(kind: str, bootstrap: str, topic: str, group: str, total: int, counter: Any, first: Any,
            stop: Any) -> None:
    """One consumer process: confluent-kafka's ``Consumer`` (auto-commit) or ``ShareConsumer``
    (implicit acknowledgement: a poll's records are accepted with the next poll, the last ones at
    close), counting what it is handed into ``counter`` until ``total`` together."""
    from confluent_kafka import Consumer, ShareConsumer

    config = {"bootstrap.servers": bootstrap, "group.id": group}
    consumer: Any = (Consumer({**config, "auto.offset.reset": "earliest"}) if kind == "plain-client"
                     else ShareConsumer(config))
    consumer.subscribe([topic])
    try:
        while not stop.is_set():
            messages = consumer.consume(1000, 0.2) if kind == "plain-client" else consumer.poll(0.2)
            got = sum(1 for m in messages if m.error() is None)
            if got:
                with counter.get_lock():
                    if first.value == 0.0:
                        first.value = time.perf_counter()
                    counter.value += got
                    if counter.value >= total:
                        stop.set()
        if kind != "plain-client":
            consumer.commit_sync()
    finally:
        consumer.close()


def clients(port: int, kind: str, topic: str, total: int, group: str) -> tuple[int, float]:
    """``kind``'s consumers, one process each (no client shares an interpreter lock), until they were
    handed ``total`` records; (records, seconds from the first to the last)."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    counter, first, stop = ctx.Value("q", 0), ctx.Value("d", 0.0), ctx.Event()
    members = int(kind.rsplit("x", 1)[1]) if "-x" in kind else 1
    procs = [ctx.Process(target=_client, args=(kind, f"{HOST}:{port}", topic, group, total, counter, first, stop))
             for _ in range(members)]
    for proc in procs:
        proc.start()
    stop.wait(600)
    ended = time.perf_counter()
    for proc in procs:
        proc.join(60)
        if proc.is_alive():
            proc.kill()
    if counter.value < total:
        raise RuntimeError(f"{kind}: only {counter.value} of {total} records in 600 s")
    return int(counter.value), ended - first.value


# ---- one sitting -----------------------------------------------------------------------------

async def measure(port: int, pid: int | tuple[int, ...], kind: str, topic: str, partitions: int, total: int,
                  group: str, coordinator: int | None = None) -> Run:
    """One run; server CPU is ``pid``'s, or the sum over several (a supervisor and its shards)."""
    pids = pid if isinstance(pid, tuple) else (pid,)

    def server_cpu() -> list[float]:
        return [cpu_seconds(p) for p in pids]

    load = os.getloadavg()[0]
    cpu0, own0 = server_cpu(), time.process_time()
    started = time.perf_counter()
    empty = 0
    if kind.endswith(("client", "client-x1", "client-x4")):
        records, seconds = await asyncio.to_thread(clients, port, kind, topic, total, group)
        requests = 0
    elif kind == "plain":
        records, requests = await plain(port, topic, partitions, total, group, coordinator)
        seconds = time.perf_counter() - started
    else:
        records, requests, seconds, empty = await share(port, topic, total, group, int(kind.split("x")[1]),
                                                        coordinator)
    spent = tuple(after - before for before, after in zip(cpu0, server_cpu(), strict=True))
    return Run(kind, topic, records, seconds, sum(spent), time.process_time() - own0, load, requests, empty,
               spent if len(spent) > 1 else ())


def profiled(pid: int, directory: Path | None, name: str, seconds: float) -> subprocess.Popen[bytes] | None:
    spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
    if directory is None or spy is None:
        return None
    directory.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen([spy, "record", "-p", str(pid), "-d", str(int(seconds)), "-r", "400", "-f", "raw",
                             "-o", str(directory / f"{name}.txt")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def sitting(records: int, rounds: int, kinds: list[str], workdir: Path, profile: Path | None = None,
                  overrides: dict[str, str] | None = None, two_partitions: bool = True, shards: int = 1,
                  group_shard: int | None = None) -> list[Run]:
    """``rounds`` of ``kinds``; with ``group_shard``, every group id is one placed on that shard."""
    if group_shard is not None and not 0 <= group_shard < shards:
        raise ValueError(f"--group-shard must be between 0 and {shards - 1} (--shards {shards})")
    layout = ShardLayout(int((overrides or {}).get("offsets.topic.num.partitions", DEFAULT_PARTITIONS)), shards)
    runs: list[Run] = []
    with server(workdir, overrides, shards) as proc:
        assert proc.proc is not None
        pid, port = proc.proc.pid, proc.port
        pids = server_pids(pid)
        coordinator = port + group_shard if group_shard is not None else None
        if shards > 1:
            if len(pids) != shards + 1:
                raise RuntimeError(f"expected {shards} shard processes under the supervisor, found {pids[1:]}")
            print(f"  server CPU: the supervisor's (pid {pid}) and its {shards} shard processes' "
                  f"(pids {', '.join(map(str, pids[1:]))}) together; groups on shard "
                  f"{'as named' if group_shard is None else group_shard}", flush=True)
        topics = {"share1": 1, **({"share2": 2} if two_partitions else {})}
        await create_topics(port, topics)
        for topic, n in topics.items():
            await asyncio.to_thread(produce, port, topic, n, records)
        serial = 0
        for r in range(rounds):
            order = kinds[r % len(kinds):] + kinds[:r % len(kinds)]  # alternate who goes first
            for topic, n in topics.items():
                for kind in order:
                    if n == 2 and kind in ("share-x1", "share-client-x1"):
                        continue
                    serial += 1
                    spies = [profiled(p, profile, f"{kind}-{topic}-{r}" + (f"-shard{k}" if shards > 1 else ""), 8)
                             for k, p in enumerate(pids[1:] if shards > 1 else (pid,))] if profile else []
                    run = await measure(port, pids if shards > 1 else pid, kind, topic, n, records,
                                        group_id(f"{kind}-{serial}", layout, group_shard), coordinator)
                    for spy in spies:
                        if spy is not None:
                            spy.wait(60)
                    runs.append(run)
                    print(f"  {kind:9} {topic}: {run.rps:9,.0f} records/s  server {run.cpu_us_per_record:6.2f} µs CPU "
                          f"per record  loadgen {run.loadgen_cpu_s / run.records * 1e6:5.1f} µs  "
                          f"{run.requests} requests ({run.empty} empty)  load {run.load:.1f}" + (
                              "  (supervisor, shard 0, ...: " + ", ".join(
                                  f"{c / run.records * 1e6:.2f}" for c in run.process_cpu_s) + " µs)"
                              if run.process_cpu_s else ""), flush=True)
    return runs


def summary(runs: list[Run]) -> list[dict[str, Any]]:
    """Per (kind, topic): the median records/s and server CPU per record over the rounds."""
    out = []
    for key in dict.fromkeys((r.kind, r.topic) for r in runs):
        same = [r for r in runs if (r.kind, r.topic) == key]
        out.append({"kind": key[0], "topic": key[1], "runs": len(same),
                    "rps": statistics.median(r.rps for r in same), "rps_all": [round(r.rps) for r in same],
                    "cpu_us": statistics.median(r.cpu_us_per_record for r in same),
                    "loadgen_us": statistics.median(r.loadgen_cpu_s / r.records * 1e6 for r in same),
                    "load": statistics.mean(r.load for r in same)})
    return out


KINDS = ["plain", "share-x1", "share-x4"]
CLIENT_KINDS = ["plain-client", "share-client-x1", "share-client-x4"]
LABELS = {"plain": "plain consumer group, 1 consumer", "share-x1": "share group, 1 consumer",
          "share-x4": "share group, 4 consumers",
          "plain-client": "confluent-kafka Consumer, 1", "share-client-x1": "confluent-kafka ShareConsumer, 1",
          "share-client-x4": "confluent-kafka ShareConsumer, 4 (one process each)"}


def rows(runs: list[Run]) -> list[Any]:
    """The suite's rows (``bench/report.Row``): one per kind and topic, the targets on the share rows."""
    from bench.report import Row, verdict

    out = []
    med = {(s["kind"], s["topic"]): s for s in summary(runs)}
    for (kind, topic), s in med.items():
        partitions = 2 if topic == "share2" else 1
        client = kind in CLIENT_KINDS
        row = Row("share", f"{LABELS[kind]}, {partitions} partition{'s' if partitions > 1 else ''}, "
                  f"{runs[0].records:,} records of 100 B", "coordinator",
                  f"{s['rps']:,.0f} records/s (median of {s['runs']}: {', '.join(f'{r:,}' for r in s['rps_all'])}); "
                  f"server {s['cpu_us']:.1f} µs CPU/record; "
                  + ("" if client else f"load generator {s['loadgen_us']:.1f} µs; ") + f"load {s['load']:.1f}",
                  detail=s)
        plain, x1 = (KINDS[:2] if not client else CLIENT_KINDS[:2])
        if kind == x1 and topic == "share1" and (base := med.get((plain, "share1"))) is not None:
            ratio = s["rps"] / base["rps"]
            row.result += f"; **{ratio:.2f}× plain**"
            row.target, row.met = "≥ 0.5× plain", verdict(ratio >= 0.5)
        if kind.endswith("x4") and topic == "share1" and (base := med.get((x1, "share1"))) is not None:
            ratio = s["rps"] / base["rps"]
            row.result += f"; **{ratio:.2f}× share ×1**"
            row.target, row.met = "> share ×1 on 1 partition", verdict(ratio > 1.0)
        out.append(row)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default=",".join(KINDS),
                        help=f"comma-separated subset of {KINDS + CLIENT_KINDS} (the clients: real consumers)")
    parser.add_argument("--one-partition", action="store_true", help="skip the 2-partition topic")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a server setting")
    parser.add_argument("--shards", type=int, default=1, help="coordinator.shards: a supervisor and N shard "
                        "processes, server CPU summed over all of them")
    parser.add_argument("--group-shard", type=int, metavar="K",
                        help="place every group on shard K (K >= 1: a share group forwarded by shard 0)")
    parser.add_argument("--profile", metavar="DIR", help="py-spy the server for 8 s of each run, raw stacks into DIR")
    args = parser.parse_args(argv)
    if args.shards < 1 or (args.group_shard is not None and not 0 <= args.group_shard < args.shards):
        parser.error(f"--shards must be at least 1 and --group-shard between 0 and {args.shards - 1}")
    kinds = [k for k in args.only.split(",") if k]
    with tempfile.TemporaryDirectory(prefix="share-bench-") as tmp:
        runs = asyncio.run(sitting(args.records, args.rounds, kinds, Path(tmp),
                                   Path(args.profile) if args.profile else None,
                                   dict(item.split("=", 1) for item in args.set),
                                   two_partitions=not args.one_partition, shards=args.shards,
                                   group_shard=args.group_shard))
    for s in summary(runs):
        print(f"{s['kind']:8} {s['topic']}: median {s['rps']:,.0f} records/s {s['rps_all']}, "
              f"server {s['cpu_us']:.2f} µs/record, loadgen {s['loadgen_us']:.1f} µs/record, load {s['load']:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
