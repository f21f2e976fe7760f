"""The shard supervisor: `coordinator serve` with `coordinator.shards` above 1.

Theory of operation
-------------------
The supervisor owns no group state. It starts one child process per shard
(`python -m coordinator serve <the same arguments> --shard K`), watches them, stops them, and
serves the one metrics endpoint (`metrics.listen`) for all of them.

Start-up, in order:
1. **Supervisor lock.** `<log.dirs>/supervisor.lock` (`flock`) makes one supervisor per data
   directory. A second `coordinator serve` on the same directory waits (polls the lock, as a shard
   standby polls its own) with its /healthz answering and /readyz not ready; when the first
   supervisor dies its children die with it, and the standby proceeds (each new child then waits
   for its shard's lock as today, so takeover is the shards' own standby takeover).
2. **Layout.** `ensure_layout` (`reshard.py`) brings the data directory to the configured
   layout, under the supervisor lock so that no shard runs while partitions move.
3. **Children.** Shard K runs with the supervisor's arguments plus `--shard K` and
   `--metrics-listen 127.0.0.1:0`: it writes the port it bound to `<shard dir>/metrics.port`
   (deleted before each start, so a port read there is the live child's). Each child gets
   `PR_SET_PDEATHSIG=SIGTERM`: if the supervisor dies, even by SIGKILL, the kernel asks its
   children to drain and exit, so none is left holding a shard lock.

Each shard's states: **starting** (spawned, its /readyz not yet 200) -> **ready** -> exited.
- Exited while starting, before the shard was ever ready since the supervisor started (or with
  exit code 2, the command line's "cannot start", on any start): **the shard cannot start**. The
  supervisor stops the others and exits with code 2 and one line, the child's own reason named
  with its shard (`coordinator: cannot start: shard 1 (node 2): listeners ...: Address already in
  use`).
- Exited otherwise (SIGKILL, a fail-stop after a log write error, a stray SIGTERM): **crashed**.
  One log line names the shard and its exit status, and the shard is started again after a
  backoff (0.1 s doubling to 5 s while it keeps failing before it is ready). The child replays its
  log, so its groups resume as they were: members keep their ids, epochs and partitions.
- SIGTERM or SIGINT to the supervisor: SIGTERM to every child, each drains as a single process
  does (`shutdown.timeout.ms`), the supervisor waits for all of them and exits 0.

Child stderr passes through the supervisor, line by line: its one-line "coordinator: ..." errors
are held back so that a start-up failure is reported once, by the supervisor, with the shard's
name. Child stdout (the structured log) is inherited untouched.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import fcntl
import os
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ..config import Config
from ..logging import get_logger
from ..metrics import METRICS_PORT_FILE, MetricsServer
from ..runtime.ownership import STANDBY_POLL_S
from ..runtime.startup_checks import StartupError, prepare_data_dir
from ..shards import scrape
from ..shards.placement import LayoutError, ShardLayout, read_layout, shard_data_dir
from ..shards.reshard import ensure_layout

log = get_logger("coordinator.supervisor")

SUPERVISOR_LOCK = "supervisor.lock"
CANNOT_START = 2
"""The command line's exit code for "cannot start" (one line on stderr)."""
_READY_POLL_S = 0.05
_BACKOFF_FIRST_S = 0.1
_BACKOFF_MAX_S = 5.0
_CHILD_ERROR_PREFIX = "coordinator: "
_STOP_GRACE_S = 10.0
"""How long past `shutdown.timeout.ms` a child may take to exit before it is killed."""
_PR_SET_PDEATHSIG = 1


@dataclass
class Shard:
    """One shard's child process, as the supervisor sees it."""

    index: int
    node_id: int
    data_dir: Path
    proc: asyncio.subprocess.Process | None = None
    ready: bool = False
    restarts: int = 0
    failures: int = 0  # consecutive exits before reaching ready
    error_line: str = ""  # the child's last "coordinator: ..." stderr line
    relay: asyncio.Task[None] | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        return f"shard {self.index} (node {self.node_id})"

    def metrics_port(self) -> int | None:
        try:
            return int((self.data_dir / METRICS_PORT_FILE).read_text())
        except (OSError, ValueError):
            return None

    def running(self) -> bool:
        return self.proc is not None and self.proc.returncode is None


def try_lock(path: Path) -> int | None:
    """An exclusive `flock` on `path` (created if missing): the open fd, or None if another
    process holds it. The fd is close-on-exec, so children never inherit the lock."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return fd


def _die_with_supervisor(supervisor_pid: int) -> None:
    """Runs in the child between fork and exec: the kernel sends it SIGTERM when the supervisor
    dies (the setting survives exec). If the supervisor already died, stop now."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: children outlive a killed supervisor
        return
    if os.getppid() != supervisor_pid:
        os.kill(os.getpid(), signal.SIGTERM)


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


class Supervisor:
    """Starts, watches and stops the shard processes of one data directory (module docstring)."""

    def __init__(self, config: Config, layout: ShardLayout, child_args: list[str]) -> None:
        """`child_args`: the `serve` command line as given (`serve --listen ...`); each child gets
        it with `--metrics-listen 127.0.0.1:0 --shard K` appended (the last flag wins)."""
        self.config = config
        self.layout = layout
        self.root = config.data_dir
        self.child_args = child_args
        self.shards = [Shard(k, config["node.id"] + k, shard_data_dir(self.root, k)) for k in range(layout.shards)]
        self._stop = asyncio.Event()
        self._failure: str | None = None
        self._lock_fd: int | None = None
        self._metrics: MetricsServer | None = None
        self._metrics_deferred = False
        self._watchers: list[asyncio.Task[None]] = []
        self._ever_ready = False

    # -- the endpoint ---------------------------------------------------------------------
    async def is_ready(self) -> bool:
        """Every shard's own /readyz answers 200 now."""
        if not self._ever_ready or self._stop.is_set():
            return False
        answers = await asyncio.gather(*(self._get(shard, "/readyz") for shard in self.shards))
        return all(answer is not None and answer[0] == 200 for answer in answers)

    async def exposition(self) -> bytes:
        scraped = await asyncio.gather(*(self._get(shard, "/metrics") for shard in self.shards))
        texts = {shard.index: answer[1].decode("utf-8", "replace")
                 for shard, answer in zip(self.shards, scraped, strict=True) if answer is not None and answer[0] == 200}
        return scrape.exposition(texts, len(self.shards), {s.index: s.restarts for s in self.shards})

    @staticmethod
    async def _get(shard: Shard, path: str) -> tuple[int, bytes] | None:
        port = shard.metrics_port() if shard.running() else None
        if port is None:
            return None
        try:
            return await scrape.http_get(port, path)
        except (OSError, TimeoutError):
            return None

    @property
    def metrics_port(self) -> int | None:
        return self._metrics.port if self._metrics is not None and not self._metrics_deferred else None

    async def _open_metrics(self, *, may_defer: bool) -> None:
        listen = self.config.metrics_listen
        if listen is None:
            return
        host, port = listen
        server = MetricsServer(host or None, port, self.is_ready, self.exposition)
        try:
            await server.start()
        except OSError as exc:
            if may_defer and exc.errno == errno.EADDRINUSE:
                # The active supervisor on this host has it (same configuration): opened at takeover.
                self._metrics_deferred = True
                return
            raise StartupError(f"metrics.listen {self.config['metrics.listen']}: "
                               f"{os.strerror(exc.errno) if exc.errno else exc}") from exc
        self._metrics = server
        self._metrics_deferred = False

    # -- lifecycle ------------------------------------------------------------------------
    def request_stop(self) -> None:
        self._stop.set()

    async def run(self) -> int:
        """Until SIGTERM/SIGINT (exit 0) or a shard that cannot start (`StartupError`)."""
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self.request_stop)
        try:
            if not await self._take_data_dir():
                return 0  # stopped while waiting as a standby
            try:
                await asyncio.to_thread(ensure_layout, self.root, self.layout)
            except LayoutError as exc:
                raise StartupError(str(exc)) from exc
            log.info("supervisor_started", shards=len(self.shards), data_dir=str(self.root),
                     metrics_port=self.metrics_port, pid=os.getpid())
            self._watchers = [asyncio.create_task(self._watch(shard), name=f"shard-{shard.index}")
                              for shard in self.shards]
            await self._stop.wait()
            log.info("supervisor_stopping", reason="cannot start" if self._failure else "signal")
            await self._stop_children()
        finally:
            for watcher in self._watchers:  # only when the supervisor itself failed
                watcher.cancel()
            await asyncio.gather(*self._watchers, return_exceptions=True)
            if self._metrics is not None:
                await self._metrics.stop()
            if self._lock_fd is not None:
                os.close(self._lock_fd)
            for signum in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(signum)
        if self._failure is not None:
            raise StartupError(self._failure)
        log.info("supervisor_stopped")
        return 0

    async def _take_data_dir(self) -> bool:
        """Hold `supervisor.lock`, waiting as a standby while another supervisor holds it.
        False when a stop was requested first."""
        prepare_data_dir(self.root)
        fd = try_lock(self.root / SUPERVISOR_LOCK)
        if fd is None:
            await self._open_metrics(may_defer=True)
            log.info("supervisor_standby_waiting", data_dir=str(self.root))
            while fd is None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), STANDBY_POLL_S)
                if self._stop.is_set():
                    return False
                fd = try_lock(self.root / SUPERVISOR_LOCK)
            log.info("supervisor_standby_takeover", data_dir=str(self.root))
        self._lock_fd = fd
        if self._metrics is None:
            await self._open_metrics(may_defer=False)
        return True

    async def _watch(self, shard: Shard) -> None:
        """Start the shard and keep it running until the supervisor stops (module docstring)."""
        try:
            await self._keep_running(shard)
        except Exception as exc:  # spawning failed (no such interpreter, out of processes)
            log.debug("shard_watch_failed", shard=shard.index, exc_info=exc)
            if self._failure is None:
                self._failure = f"{shard.name}: {type(exc).__name__}: {exc}"
            self._stop.set()

    async def _keep_running(self, shard: Shard) -> None:
        while not self._stop.is_set():
            proc = await self._spawn(shard)
            if self._stop.is_set():  # asked to stop while it was being spawned
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGTERM)
            readiness = asyncio.create_task(self._await_ready(shard))
            try:
                code = await proc.wait()
            finally:
                readiness.cancel()
            if shard.relay is not None:
                await shard.relay  # the child's last stderr lines
            if self._stop.is_set():
                return
            if not shard.ready and (not self._ever_ready or code == CANNOT_START):
                self._fail(shard, code)
                return
            shard.failures = 0 if shard.ready else shard.failures + 1
            backoff = min(_BACKOFF_FIRST_S * 2 ** shard.failures, _BACKOFF_MAX_S)
            shard.restarts += 1
            log.warning("shard_exited", shard=shard.index, node_id=shard.node_id, pid=proc.pid,
                        status=describe_exit(code), was_ready=shard.ready, restart_in_s=backoff,
                        error=shard.error_line or None)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), backoff)

    async def _spawn(self, shard: Shard) -> asyncio.subprocess.Process:
        with contextlib.suppress(FileNotFoundError):
            (shard.data_dir / METRICS_PORT_FILE).unlink()
        shard.ready = False
        shard.error_line = ""
        supervisor_pid = os.getpid()
        shard.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "coordinator", *self.child_args,
            "--metrics-listen", "127.0.0.1:0", "--shard", str(shard.index),
            stdin=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
            preexec_fn=lambda: _die_with_supervisor(supervisor_pid))
        shard.relay = asyncio.create_task(self._relay_stderr(shard, shard.proc))
        log.info("shard_started", shard=shard.index, node_id=shard.node_id, pid=shard.proc.pid)
        return shard.proc

    async def _relay_stderr(self, shard: Shard, proc: asyncio.subprocess.Process) -> None:
        """Pass the child's stderr on, holding back its one-line errors (reported by `_watch`)."""
        assert proc.stderr is not None
        out = sys.stderr.buffer
        while line := await proc.stderr.readline():
            text = line.decode("utf-8", "replace").rstrip("\n")
            if text.startswith(_CHILD_ERROR_PREFIX):
                shard.error_line = text
                continue
            with contextlib.suppress(OSError, ValueError):  # our own stderr gone: the shard keeps running
                out.write(line)
                out.flush()

    async def _await_ready(self, shard: Shard) -> None:
        while True:
            answer = await self._get(shard, "/readyz")
            if answer is not None and answer[0] == 200:
                shard.ready = True
                shard.failures = 0
                log.info("shard_ready", shard=shard.index, node_id=shard.node_id,
                         pid=shard.proc.pid if shard.proc else None)
                if not self._ever_ready and all(s.ready for s in self.shards):
                    self._ever_ready = True  # from now on an exit during start-up is a crash to restart
                    log.info("supervisor_ready", shards=len(self.shards))
                return
            await asyncio.sleep(_READY_POLL_S)

    def _fail(self, shard: Shard, code: int) -> None:
        """The shard cannot start: remember its reason (the first one wins) and stop the rest."""
        if self._failure is None:
            reason = shard.error_line.removeprefix(_CHILD_ERROR_PREFIX).removeprefix("cannot start: ")
            self._failure = f"{shard.name}: {reason}" if reason else f"{shard.name} exited during start-up ({describe_exit(code)})"
        self._stop.set()

    async def _stop_children(self) -> None:
        """SIGTERM every running child and wait until every watcher has seen its child exit (each
        drains as one process does); a child still running `shutdown.timeout.ms` plus a grace
        period later is killed."""
        for shard in self.shards:
            if shard.running():
                assert shard.proc is not None
                with contextlib.suppress(ProcessLookupError):
                    shard.proc.send_signal(signal.SIGTERM)
        if not self._watchers:
            return
        limit = self.config["shutdown.timeout.ms"] / 1000 + _STOP_GRACE_S
        _, late = await asyncio.wait(self._watchers, timeout=limit)
        if late:
            for shard in self.shards:
                if shard.running():
                    assert shard.proc is not None
                    log.warning("shard_stop_timeout", shard=shard.index, pid=shard.proc.pid, timeout_s=limit)
                    with contextlib.suppress(ProcessLookupError):
                        shard.proc.kill()
            await asyncio.wait(late, timeout=_STOP_GRACE_S)


def lay_out_single_process(root: Path, layout: ShardLayout) -> None:
    """`coordinator serve` with one shard: `ensure_layout` as the supervisor would. A directory a
    supervisor laid out for several shards is taken under `supervisor.lock` (waiting for a running
    supervisor to stop first), so partitions never move under running shards. Otherwise no lock is
    taken: a one-shard standby keeps waiting on the data directory's own lock, tailing its log."""
    recorded = read_layout(root)
    if recorded is None or recorded.shards == layout.shards:
        ensure_layout(root, layout)
        return
    fd = os.open(root / SUPERVISOR_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.info("supervisor_standby_waiting", data_dir=str(root))
            fcntl.flock(fd, fcntl.LOCK_EX)  # SIGTERM's default action ends the wait
        ensure_layout(root, layout)
    finally:
        os.close(fd)


async def supervise(config: Config, layout: ShardLayout, child_args: list[str]) -> int:
    """`coordinator serve` with several shards: run the supervisor until it stops."""
    return await Supervisor(config, layout, child_args).run()
