"""Delivery of events to a session's socket, wherever that socket is.

Each event is first logged with the session's next offset (``event_log``), so that a socket
that comes back after a drop gets what it missed (``replay``). A socket held by this process
then gets the event directly (no channel layer on the hot path); otherwise the event goes to
the session's group on the channel layer, which the consumer holding the socket in another
process has joined.

The event is encoded once, here (``event_frames``): the log, the local socket and the channel
layer all carry that one frame text.
"""

import logging
import threading
import uuid
from typing import Any, Protocol, cast

from channels.layers import BaseChannelLayer, get_channel_layer

from sessions_app import metrics
from sessions_app.event_frames import EncodedEvent, encode_event
from sessions_app.event_log import event_log

logger = logging.getLogger(__name__)


class EmittingSocket(Protocol):
    closed: bool
    channel_name: str  # the consumer's, as its session record names it

    @property
    def wants_offsets(self) -> bool: ...

    async def emit(self, event: str, *args: Any) -> None: ...

    async def deliver(self, offset: int | None, encoded: EncodedEvent) -> None: ...

    async def go_away(self) -> None: ...


def session_group(session_id: uuid.UUID) -> str:
    return f"session.{session_id.hex}"


class LocalSockets:
    """The sockets this process holds, by session id. Guarded by a lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sockets: dict[uuid.UUID, EmittingSocket] = {}

    def attach(self, session_id: uuid.UUID, socket: EmittingSocket) -> None:
        with self._lock:
            self._sockets[session_id] = socket
            metrics.sockets_connected.set(len(self._sockets))

    def detach(self, session_id: uuid.UUID, socket: EmittingSocket) -> None:
        with self._lock:
            if self._sockets.get(session_id) is socket:
                del self._sockets[session_id]
                metrics.sockets_connected.set(len(self._sockets))

    def get(self, session_id: uuid.UUID) -> EmittingSocket | None:
        with self._lock:
            return self._sockets.get(session_id)

    def clear(self) -> None:
        with self._lock:
            self._sockets.clear()
            metrics.sockets_connected.set(0)

    def session_ids(self) -> list[uuid.UUID]:
        with self._lock:
            return list(self._sockets)

    def items(self) -> list[tuple[uuid.UUID, EmittingSocket]]:
        with self._lock:
            return list(self._sockets.items())

    def all(self) -> list[EmittingSocket]:
        with self._lock:
            return list(self._sockets.values())

    def __len__(self) -> int:
        with self._lock:
            return len(self._sockets)


local_sockets = LocalSockets()


async def emit_to_session(session_id: uuid.UUID, event: str, *args: Any) -> None:
    """Deliver one event to the session's socket, wherever it is; never raises."""
    await emit_encoded(session_id, encode_event(event, list(args)))


async def emit_encoded(session_id: uuid.UUID, encoded: EncodedEvent) -> None:
    """Deliver an encoded event to the session's socket, wherever it is; never raises (one
    event for several sessions is encoded once, and given to each).

    Delivery is best effort per socket: a socket that is closing or gone, or a channel layer
    that is down, loses this event for this session only. Whoever emits (an engine run, a
    hook) carries on, so the run finishes and is transcribed whatever happens to a socket.
    """
    socket = local_sockets.get(session_id)
    if socket is not None and not getattr(socket, "closed", False):
        # A socket here that did not ask for offsets keeps no offset to come back with: its
        # events need no log (a socket elsewhere, or none, may have asked: those are logged).
        offset = await event_log.append(session_id, encoded) if socket.wants_offsets else None
        await socket.deliver(offset, encoded)  # dropped if the socket went away
        return
    offset = await event_log.append(session_id, encoded)
    try:
        await cast(BaseChannelLayer, get_channel_layer()).group_send(
            session_group(session_id),
            {"type": "session.emit", "event": encoded.event, "frame": encoded.frame, "offset": offset},
        )
    except Exception as exc:
        logger.warning("event %s for session %s not delivered: %r", encoded.event, session_id, exc)
