"""Waiting in async tests: poll a condition until it holds or a deadline passes, never a fixed sleep
standing in for the wait."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from typing import Any


async def eventually(check: Callable[[], Any], timeout: float = 10.0, message: str = "condition",
                     interval: float = 0.005) -> Any:
    """Poll `check()` (plain or async) until it returns something truthy, and return that; fail the
    test naming `message` once `timeout` seconds have passed. `interval` is only the polling pace."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {message}")
        await asyncio.sleep(interval)
