"""Closing engine runs nobody has used for a while.

An engine run is a subprocess (or a remote conversation) held open between turns so that the
next message answers at once. A user who opens many threads and walks away would keep one per
thread; every ``ENGINE_IDLE_CLOSE_EVERY`` seconds this process closes the chat and integration
sessions of its pools that have been idle for ``ENGINE_IDLE_TIMEOUT`` seconds. Their engine
conversation ids are kept on the threads, so the next message resumes the same conversation
in a new run.
"""

import asyncio
import logging

from django.conf import settings

from sessions_app.runtime.pool import pools

logger = logging.getLogger(__name__)


async def close_idle_runs_once() -> int:
    """One pass over this process's pools; returns how many sessions it closed."""
    closed = 0
    for pool in pools.all():
        closed += await pool.close_idle(settings.ENGINE_IDLE_TIMEOUT)
    return closed


class IdleRunCloser:
    """One task per process (started with the mailbox, like the recovery loop)."""

    def __init__(self) -> None:
        self._task: asyncio.Task[None] | None = None

    def start(self, _address: str) -> None:
        if settings.ENGINE_IDLE_TIMEOUT <= 0:
            return  # switched off
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(min(settings.ENGINE_IDLE_TIMEOUT / 2, 30.0))
            try:
                closed = await close_idle_runs_once()
            except Exception:
                logger.exception("closing idle engine runs failed")
                continue
            if closed:
                logger.info("closed %d idle engine session(s)", closed)

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None


idle_run_closer = IdleRunCloser()
