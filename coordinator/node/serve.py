"""`coordinator serve` of one process: a node (`server.CoordinatorServer`) run until SIGTERM or
SIGINT, its start-up failures turned into the one line the command line prints."""

from __future__ import annotations

import asyncio
import contextlib
import signal

from ..config import Config
from ..logging import get_logger
from ..runtime import gc_policy
from ..runtime.startup_checks import StartupError, reason
from .server import CoordinatorServer

log = get_logger("coordinator.server")


async def serve(config: Config, shard: int | None = None) -> int:
    """Run until SIGTERM or SIGINT; returns the process exit code. A signal while the server is
    still starting (a standby waiting for the data directory, a long load) stops it as well.
    Raises `StartupError` when start-up fails, after closing what it had opened."""
    loop = asyncio.get_running_loop()
    stop_requested = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop_requested.set)
    try:
        server = CoordinatorServer(config, shard)
    except OSError as exc:
        raise StartupError(f"log.dirs {config['log.dirs']}: {reason(exc)}") from exc
    except ValueError as exc:  # a corrupt topic catalog
        raise StartupError(f"log.dirs {config['log.dirs']}: unreadable topic catalog: {exc}") from exc
    starting = asyncio.ensure_future(server.start())
    stopping = asyncio.ensure_future(stop_requested.wait())
    await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
    if not starting.done():
        starting.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await starting
        log.info("shutdown_requested", while_starting=True)
        await server.stop()
        return 0
    if (failure := starting.exception()) is not None:
        stopping.cancel()
        await server.stop()
        if isinstance(failure, StartupError):
            raise failure
        log.debug("startup_failed", exc_info=failure)
        raise StartupError(f"{type(failure).__name__}: {failure}") from failure
    # A process-wide policy, so here and not in CoordinatorServer (tests run servers in process).
    gc_policy.freeze_survivors(loop)
    await stopping
    log.info("shutdown_requested")
    await server.stop()
    return 0
