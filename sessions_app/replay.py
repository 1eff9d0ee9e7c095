"""A socket's side of event offsets: what it missed while it was away, then every live event
once and in offset order.

A client asks for offsets in its auth payload (``offsets: true``). It then receives each
session event with its offset as an extra last argument (a string, as Socket.IO's connection
state recovery carries it), and the CONNECT answer carries a ``pid``. Reconnecting, it sends
``offset`` (the last one it saw) and ``pid``: the server replays what the session emitted
after that offset before anything new and answers with the same ``pid`` when the window
covered the whole gap (socket.io-client then sets ``socket.recovered``), or a new one when it
did not (the client re-reads the history). Every such socket also gets
``connection_recovery {recovered, offset}`` right after the CONNECT answer, for clients that
cannot see the ``pid``.

Events of one session come from several places (the process running its hooks or its
thread's engine, the process that accepted a send), so they can arrive out of order: a stream
delivers offset n only after n - 1, waits briefly for a missing one and then reads it from the
log, and drops what it delivered already.
"""

import asyncio
import logging
import secrets
import uuid
from typing import Any, Protocol

from sessions_app import metrics
from sessions_app.event_frames import EncodedEvent, encode_event
from sessions_app.event_log import LoggedEvent, Missed, event_log

logger = logging.getLogger(__name__)

# How long a stream waits for an event that arrived out of order before reading it from the log.
GAP_WAIT = 0.05


class RecoveryRefused(ValueError):
    """The auth payload's recovery fields are malformed."""


class OffsetSocket(Protocol):
    async def emit(self, event: str, *args: Any) -> None: ...

    async def send_event(self, encoded: EncodedEvent) -> None: ...


def requested_offset(auth: dict[str, Any]) -> tuple[bool, int | None, str | None]:
    """``(wants offsets, the offset to resume after or None, the client's pid)``."""
    wants = auth.get("offsets") is True or "pid" in auth or "offset" in auth
    offset, pid = auth.get("offset"), auth.get("pid")
    if pid is not None and not isinstance(pid, str):
        raise RecoveryRefused("pid must be a string")
    if offset is None:
        return wants, None, pid
    if isinstance(offset, bool) or not isinstance(offset, (str, int)) or not str(offset).isdigit():
        raise RecoveryRefused("offset must be a non-negative integer (as a string)")
    return wants, int(offset), pid


class SessionStream:
    """The session's events on one socket that asked for offsets."""

    def __init__(self, socket: OffsetSocket, session_id: uuid.UUID) -> None:
        self.socket = socket
        self.session_id = session_id
        self.delivered = 0  # the offset of the last event this socket was sent
        self.pid = ""
        self.recovered = False
        self._missed: Missed | None = None
        self._held: dict[int, EncodedEvent] = {}
        self._open = False  # events are held until the replay went out
        self._lock = asyncio.Lock()
        self._filling: asyncio.Task[None] | None = None

    async def prepare(self, offset: int | None, pid: str | None) -> None:
        """Before the CONNECT answer: find out what the client missed (and so the ``pid``)."""
        if offset is None:
            missed = await event_log.since(self.session_id, 0)
            self.delivered = missed.latest  # a first connection starts with what comes next
            self.recovered = False
        else:
            missed = await event_log.since(self.session_id, offset)
            self.recovered = missed.complete
            metrics.replays.labels("true" if missed.complete else "false").inc()
            metrics.event_log_window.observe(missed.held)
            metrics.replayed_events.observe(len(missed.events))
            self._missed = missed
            self.delivered = offset if missed.complete else missed.latest
        self.pid = pid if (self.recovered and pid) else secrets.token_urlsafe(12)

    async def start(self) -> None:
        """After the CONNECT answer, with the socket already receiving live events (held):
        send the recovery flag, the missed events, anything logged since, then go live."""
        async with self._lock:
            await self.socket.emit(
                "connection_recovery", {"recovered": self.recovered, "offset": str(self.delivered)}
            )
            if self._missed is not None and self._missed.complete:
                for logged in self._missed.events:
                    await self._send(logged.offset, _encoded(logged))
            self._missed = None
            await self._catch_up()
            self._open = True
            await self._flush()

    async def deliver(self, offset: int | None, encoded: EncodedEvent) -> None:
        """A live event for the session (``offset`` None: it could not be logged)."""
        async with self._lock:
            if offset is None:
                if self._open:
                    await self.socket.send_event(encoded)
                return
            if offset <= self.delivered:
                return  # delivered already (replayed, or a second path)
            self._held[offset] = encoded
            if self._open:
                await self._flush()
                if self._held and self._filling is None:
                    self._filling = asyncio.create_task(self._fill_gap())

    async def _flush(self) -> None:
        while (next_event := self._held.pop(self.delivered + 1, None)) is not None:
            await self._send(self.delivered + 1, next_event)
        for stale in [o for o in self._held if o <= self.delivered]:
            del self._held[stale]

    async def _fill_gap(self) -> None:
        """An event is missing before held ones: give it a moment, then read the log; what
        the log no longer has is skipped (the client will not get it live)."""
        try:
            await asyncio.sleep(GAP_WAIT)
            async with self._lock:
                if not self._held:
                    return
                await self._catch_up()
                await self._flush()
                if self._held:
                    skipped_to = min(self._held) - 1
                    logger.warning(
                        "session %s: events %d..%d are gone from the log; skipped",
                        self.session_id,
                        self.delivered + 1,
                        skipped_to,
                    )
                    self.delivered = skipped_to
                    await self._flush()
        finally:
            self._filling = None

    async def _catch_up(self) -> None:
        missed = await event_log.since(self.session_id, self.delivered)
        for logged in missed.events:
            if logged.offset == self.delivered + 1:
                await self._send(logged.offset, _encoded(logged))

    async def _send(self, offset: int, encoded: EncodedEvent) -> None:
        self.delivered = offset
        self._held.pop(offset, None)
        await self.socket.send_event(encoded.with_offset(offset))  # the offset added, not encoded again

    def close(self) -> None:
        if self._filling is not None:
            self._filling.cancel()


def _encoded(logged: LoggedEvent) -> EncodedEvent:
    """An event read back from the log, encoded for the socket it is replayed to."""
    return encode_event(logged.event, logged.args)
