"""Engine.IO heartbeats for every socket of the process, from one task.

The server pings each socket every ``SOCKETIO_PING_INTERVAL`` seconds and closes one whose pong
does not come within ``SOCKETIO_PING_TIMEOUT``. A task, a sleep timer and an event per socket
cost about 2 KiB of every idle connection; here the sockets are entries in one table, swept a
few times per interval by one task per event loop.
"""

import asyncio
import logging
import threading
from collections.abc import Coroutine
from typing import Any, Protocol

from django.conf import settings

logger = logging.getLogger(__name__)


class Pingable(Protocol):
    eio_sid: str

    async def send_ping(self) -> None: ...

    async def ping_timed_out(self) -> None: ...


class _Beat:
    __slots__ = ("ping_at", "pong_by")

    def __init__(self, ping_at: float) -> None:
        self.ping_at = ping_at
        self.pong_by: float | None = None


class Heartbeats:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._beats: dict[Pingable, _Beat] = {}
        self._task: asyncio.Task[None] | None = None

    def watch(self, socket: Pingable) -> None:
        """Start pinging ``socket`` (from its event loop)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            self._beats[socket] = _Beat(loop.time() + settings.SOCKETIO_PING_INTERVAL)
            if self._task is None or self._task.done() or self._task.get_loop() is not loop:
                self._task = loop.create_task(self._sweep_forever())

    def forget(self, socket: Pingable) -> None:
        with self._lock:
            self._beats.pop(socket, None)

    def pong(self, socket: Pingable) -> None:
        """The socket answered: its next ping is an interval from now."""
        with self._lock:
            beat = self._beats.get(socket)
            if beat is not None and beat.pong_by is not None:
                beat.pong_by = None
                beat.ping_at = asyncio.get_running_loop().time() + settings.SOCKETIO_PING_INTERVAL

    def clear(self) -> None:
        with self._lock:
            self._beats.clear()

    async def _sweep_forever(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            interval, timeout = settings.SOCKETIO_PING_INTERVAL, settings.SOCKETIO_PING_TIMEOUT
            await asyncio.sleep(min(interval, timeout, 5.0) / 5)
            now = loop.time()
            to_ping: list[Pingable] = []
            silent: list[Pingable] = []
            with self._lock:
                if not self._beats:
                    self._task = None
                    return
                for socket, beat in self._beats.items():
                    if beat.pong_by is not None:
                        if now >= beat.pong_by:
                            silent.append(socket)
                    elif now >= beat.ping_at:
                        beat.pong_by = now + timeout
                        to_ping.append(socket)
                for socket in silent:
                    del self._beats[socket]
            for socket in silent:
                logger.info("socket %s missed its pong; closing", socket.eio_sid)
                await self._safely(socket.ping_timed_out())
            for socket in to_ping:
                await self._safely(socket.send_ping())

    @staticmethod
    async def _safely(call: Coroutine[Any, Any, None]) -> None:
        try:
            await call
        except Exception:
            logger.exception("heartbeat of a socket failed")


heartbeats = Heartbeats()
