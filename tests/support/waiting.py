"""Waiting for something the server (or a task of this test) does in its own time.

One poll loop for the whole suite: a condition that is true in time returns how long it took;
one that is not raises ``TimeoutError``, so the test fails where it waited.
"""

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any


async def wait_until(predicate: Callable[[], Any], timeout: float = 15, every: float = 0.05) -> float:
    """Poll a synchronous condition (a hook log, an in-memory state); returns how long it took."""
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > timeout:
            raise TimeoutError("condition not met in time")
        await asyncio.sleep(every)
    return time.monotonic() - started


async def wait_until_async(
    predicate: Callable[[], Awaitable[Any]], timeout: float = 15, every: float = 0.1
) -> float:
    """Poll an async condition (a database read); returns how long it took."""
    started = time.monotonic()
    while not await predicate():
        if time.monotonic() - started > timeout:
            raise TimeoutError("condition not met in time")
        await asyncio.sleep(every)
    return time.monotonic() - started


async def settle(seconds: float = 0.3) -> None:
    """Give the server's background tasks a moment: only before asserting that something did
    *not* happen (waiting for something that does happen is ``wait_until``'s job)."""
    await asyncio.sleep(seconds)
