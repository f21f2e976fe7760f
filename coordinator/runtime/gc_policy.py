"""How the server uses CPython's cyclic garbage collector.

The coordinator holds a large, long-lived heap (every member's assignment: dicts, frozensets and
mapping proxies, about seven tracked containers per KIP-848 member) that CPython's full
collection walks in its entirety: 200-300 ms pauses every few seconds at 20,000 members while
groups are forming, longer with more. A steady heartbeat stuck behind such a pause is the whole
tail of the latency distribution, and the pauses cost CPU exactly when the server is busiest.

The state is acyclic (every full collection in those runs found nothing to free; members and
requests are msgspec Structs the collector does not even track), so after the log is loaded, and
after every full collection, the survivors are moved to the permanent generation (`gc.freeze`):
later collections walk only what was allocated since, and reference counting still frees
everything that dies. The cost is that a reference cycle built out of frozen objects is not
reclaimed; `gc_policy.thaw()` plus `gc.collect()` would, and `coordinator_gc_frozen_objects`
shows how many objects are frozen.
"""

from __future__ import annotations

import asyncio
import gc
from typing import Any

from prometheus_client import Gauge

FROZEN = Gauge("coordinator_gc_frozen_objects", "Objects moved to the garbage collector's permanent generation.")
FROZEN.set_function(gc.get_freeze_count)

_installed: list[Any] = []


def freeze_survivors(loop: asyncio.AbstractEventLoop) -> None:
    """Freeze what is alive now, and again after every full collection (on the loop's thread:
    collections also run in worker threads)."""
    gc.freeze()
    if _installed:
        return

    def on_collection(phase: str, info: dict[str, Any]) -> None:
        if phase == "stop" and info["generation"] == 2 and not loop.is_closed():
            loop.call_soon_threadsafe(gc.freeze)

    gc.callbacks.append(on_collection)
    _installed.append(on_collection)


def thaw() -> None:
    """Stop freezing and hand every frozen object back to the collector."""
    for callback in _installed:
        gc.callbacks.remove(callback)
    _installed.clear()
    gc.unfreeze()
