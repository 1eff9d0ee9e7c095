"""A channels-redis layer whose consumers survive Redis outages and never lose a message to
another consumer's cancellation.

channels-redis receives for every process-specific channel (``specific.<prefix>!<id>``) with
one ``BZPOPMIN`` at a time, done by whichever consumer's ``receive()`` holds its receive lock,
and hands what arrives to the other consumers' buffers. Two things follow:

- when Redis is down (or a pooled connection went stale after a restart) the exception is
  raised in the consumer holding the lock; Channels then ends that consumer, so each
  WebSocket of the process is closed in turn as its consumer takes the lock;
- a consumer that leaves (its receive is cancelled) while it holds the lock interrupts the
  shared receive for everybody, and the cleaner of the message's backup copy may be
  cancelled with it (channels-redis notes that this can deliver a message twice).

Here one task per process and event loop does the receiving for all process-specific
channels, retrying with a short backoff while Redis is away, and delivers into per-channel
queues; a consumer's ``receive()`` only waits on its own queue, so cancelling it cancels
nothing shared. Normal (non-``!``) channels, like a process's mailbox reply channel, are
received as channels-redis does, retried on connection errors. Sends and group operations
still raise on errors: their callers decide (``emitter``, ``thread_bus``, ``consumers``).
"""

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from typing import Any

from channels_redis.core import RedisChannelLayer

logger = logging.getLogger(__name__)

RETRY_FIRST = 0.1
RETRY_MAX = 2.0
# A queue nobody has read for this long belongs to a consumer that left: dropped.
ABANDONED_AFTER = 120.0


class ResilientRedisChannelLayer(RedisChannelLayer):  # type: ignore[misc]  # channels_redis is untyped
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._pump_loop: asyncio.AbstractEventLoop | None = None
        self._pump: asyncio.Task[Any] | None = None
        self._queues: defaultdict[str, asyncio.Queue[dict[str, Any]]] = defaultdict(asyncio.Queue)
        self._last_read: dict[str, float] = {}

    async def receive(self, channel: str) -> dict[str, Any]:
        assert self.require_valid_channel_name(channel)
        if "!" not in channel:
            return await self._retrying(super().receive, channel)
        self._ensure_pump(self.non_local_name(channel))
        self._last_read[channel] = time.monotonic()
        queue = self._queues[channel]
        message = await queue.get()
        self._last_read[channel] = time.monotonic()
        return message

    def _ensure_pump(self, real_channel: str) -> None:
        loop = asyncio.get_running_loop()
        if self._pump_loop is not loop or self._pump is None or self._pump.done():
            if self._pump_loop is not loop:  # a new event loop (tests): queues of the old one are dead
                self._queues = defaultdict(asyncio.Queue)
                self._last_read = {}
            self._pump_loop = loop
            self._pump = loop.create_task(self._receive_forever(real_channel))

    async def _receive_forever(self, real_channel: str) -> None:
        delay = RETRY_FIRST
        while True:
            try:
                target, message = await self.receive_single(real_channel)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                logger.warning("channel layer receive failed (%r); retrying in %.1fs", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX)
                continue
            delay = RETRY_FIRST
            now = time.monotonic()
            for channel in target if isinstance(target, list) else [target]:
                self._queues[channel].put_nowait(message)
                self._last_read.setdefault(channel, now)
            self._drop_abandoned()

    def _drop_abandoned(self) -> None:
        now = time.monotonic()
        for channel, last in list(self._last_read.items()):
            if now - last > ABANDONED_AFTER:
                queue = self._queues.get(channel)
                if queue is None or not getattr(queue, "_getters", None):  # nobody waits on it
                    self._queues.pop(channel, None)
                    self._last_read.pop(channel, None)

    async def _retrying(
        self, receive: Callable[[str], Awaitable[dict[str, Any]]], channel: str
    ) -> dict[str, Any]:
        delay = RETRY_FIRST
        while True:
            try:
                return await receive(channel)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                logger.warning("receive on %s failed (%r); retrying in %.1fs", channel, exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX)
