"""Who runs a session's turn right now, across processes, and how to stop it from anywhere.

A turn (a hook run) is claimed in the session record with a conditional UPDATE that names the
claiming process's mailbox channel and a heartbeat. A second process that receives a message
for the same session waits for the claim, so hooks of one session never overlap even when
the socket moved between processes mid-turn. A claim whose heartbeat is older than
``STALE_AFTER`` belongs to a dead process and may be taken over.

``stop`` sent from the process holding the socket reaches the process running the turn
through that process's mailbox (``sessions_app.mailbox``).
"""

import asyncio
import logging
import threading
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from channels.db import database_sync_to_async
from django.db.models import Q
from django.utils import timezone

from sessions_app.mailbox import mailbox
from sessions_app.models import SocketSession

logger = logging.getLogger(__name__)

HEARTBEAT_EVERY = 2.0
STALE_AFTER = 10.0
CLAIM_POLL = 0.05


def _fresh_claim() -> Q:
    return ~Q(turn_owner="") & Q(turn_heartbeat__gte=timezone.now() - timedelta(seconds=STALE_AFTER))


@database_sync_to_async
def _try_claim(session_id: uuid.UUID, owner: str) -> bool:
    return (
        SocketSession.objects.filter(pk=session_id)
        .exclude(_fresh_claim())
        .update(turn_owner=owner, turn_heartbeat=timezone.now())
        == 1
    )


@database_sync_to_async
def _beat(session_id: uuid.UUID, owner: str) -> None:
    SocketSession.objects.filter(pk=session_id, turn_owner=owner).update(turn_heartbeat=timezone.now())


@database_sync_to_async
def _release(session_id: uuid.UUID, owner: str) -> None:
    SocketSession.objects.filter(pk=session_id, turn_owner=owner).update(turn_owner="", turn_heartbeat=None)


@database_sync_to_async
def turn_running(session_id: uuid.UUID) -> bool:
    """True while some process holds a live claim on this session's turn."""
    return SocketSession.objects.filter(_fresh_claim(), pk=session_id).exists()


@database_sync_to_async
def _turn_owner(session_id: uuid.UUID) -> str:
    return (
        SocketSession.objects.filter(_fresh_claim(), pk=session_id)
        .values_list("turn_owner", flat=True)
        .first()
        or ""
    )


class StopHandlers:
    """Cancel callbacks of the sessions whose turns run in this process, by session id."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._handlers: dict[uuid.UUID, Callable[[], Awaitable[None]]] = {}

    def add(self, session_id: uuid.UUID, handler: Callable[[], Awaitable[None]]) -> None:
        with self._lock:
            self._handlers[session_id] = handler

    def forget(self, session_id: uuid.UUID) -> None:
        with self._lock:
            self._handlers.pop(session_id, None)

    async def __call__(self, message: dict[str, Any]) -> bool:
        with self._lock:
            handler = self._handlers.get(uuid.UUID(message["session"]))
        if handler is None:
            return False
        await handler()
        return True


stop_handlers = StopHandlers()
mailbox.register("turn.stop", stop_handlers)


class TurnClaim:
    """``async with TurnClaim(session_id):`` waits for and holds the session's turn."""

    def __init__(self, session_id: uuid.UUID) -> None:
        self.session_id = session_id
        self._owner = ""
        self._beating: asyncio.Task | None = None

    async def __aenter__(self) -> "TurnClaim":
        self._owner = await mailbox.channel()
        while not await _try_claim(self.session_id, self._owner):  # noqa: ASYNC110 - the claim lives in the database
            await asyncio.sleep(CLAIM_POLL)
        self._beating = asyncio.create_task(self._heartbeat())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._beating is not None:
            self._beating.cancel()
        await asyncio.shield(_release(self.session_id, self._owner))

    async def _heartbeat(self) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_EVERY)
            await _beat(self.session_id, self._owner)


async def request_remote_stop(session_id: uuid.UUID) -> bool:
    """Ask the process running this session's turn (if another one) to stop it."""
    owner = await _turn_owner(session_id)
    if not owner or owner == await mailbox.channel():
        return False
    await mailbox.send(owner, {"type": "turn.stop", "session": str(session_id)})
    return True
