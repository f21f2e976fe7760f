"""The collector policy: survivors of a full collection are frozen; thawing hands them back."""

from __future__ import annotations

import asyncio
import gc

import pytest

from coordinator.runtime import gc_policy
from tests.support.polling import eventually


async def frozen_at_least(count: int, timeout: float = 5.0) -> int:
    """The freeze runs on the loop right after a collection: poll for it with a deadline."""
    await eventually(lambda: gc.get_freeze_count() >= count, timeout, f"{count} objects frozen")
    return gc.get_freeze_count()


@pytest.mark.asyncio
async def test_survivors_of_a_full_collection_are_frozen_until_thawed() -> None:
    try:
        gc_policy.freeze_survivors(asyncio.get_running_loop())
        frozen = gc.get_freeze_count()
        assert frozen > 0
        survivors = [[i] for i in range(5_000)]  # new, alive, and lists stay tracked
        gc.collect()
        await frozen_at_least(frozen + len(survivors))
    finally:
        gc_policy.thaw()
    assert gc.get_freeze_count() == 0
    assert not any(getattr(cb, "__qualname__", "").startswith("freeze_survivors") for cb in gc.callbacks)
