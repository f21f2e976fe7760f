"""The collector policy: survivors of a full collection are frozen; thawing hands them back."""

from __future__ import annotations

import asyncio
import gc

import pytest

from coordinator.runtime import gc_policy


@pytest.mark.asyncio
async def test_survivors_of_a_full_collection_are_frozen_until_thawed() -> None:
    try:
        gc_policy.freeze_survivors(asyncio.get_running_loop())
        frozen = gc.get_freeze_count()
        assert frozen > 0
        survivors = [[i] for i in range(5_000)]  # new, alive, and lists stay tracked
        gc.collect()
        await asyncio.sleep(0)  # the freeze runs on the loop, right after the collection
        assert gc.get_freeze_count() >= frozen + len(survivors)
    finally:
        gc_policy.thaw()
    assert gc.get_freeze_count() == 0
    gc.collect()
    await asyncio.sleep(0)
    assert gc.get_freeze_count() == 0  # no longer installed
