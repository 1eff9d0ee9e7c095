"""Who runs a session's turn right now, across processes, and how to stop it from anywhere.

A turn (a hook run) is claimed in the session record with a conditional UPDATE that names the
claiming process's mailbox address. A second process that receives a message for the same
session waits for the claim, so hooks of one session never overlap even when the socket moved
between processes mid-turn. A claim held by a dead process (``sessions_app.processes``) is
free and may be taken over.

``stop`` sent from the process holding the socket reaches the process running the turn
through that process's mailbox (``sessions_app.mailbox``).
"""

import asyncio
import logging
import threading
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from django.db.models import Q
from django.utils import timezone

from sessions_app.database import database_sync_to_async
from sessions_app.mailbox import mailbox
from sessions_app.models import SocketSession
from sessions_app.processes import claimable, held_by_live_process
from threads_app.services import settle_sends

logger = logging.getLogger(__name__)

CLAIM_POLL = 0.05


def _fresh_claim() -> Q:
    """The turn is held by a live process (a dead process's claim is free)."""
    return ~Q(turn_owner="") & held_by_live_process("turn_owner")


@database_sync_to_async
def _try_claim(session_id: uuid.UUID, owner: str, prelude: Callable[[], Any] | None) -> tuple[bool, Any]:
    """Claim the turn and, when that succeeded, run ``prelude`` in the same database call:
    ``(claimed, its result or the exception it raised)``."""
    claimed = (
        SocketSession.objects.filter(claimable("turn_owner", owner, reentrant=False), pk=session_id).update(
            turn_owner=owner, turn_heartbeat=timezone.now()
        )
        == 1
    )
    if not claimed or prelude is None:
        return claimed, None
    try:
        return True, prelude()
    except Exception as exc:
        return True, exc


@database_sync_to_async
def _release(session_id: uuid.UUID, owner: str, settle: tuple[uuid.UUID, str] | None) -> None:
    if settle is not None:
        try:
            settle_sends([settle[0]], settle[1])
        except Exception:
            logger.exception("could not record the outcome of send %s", settle[0])
    SocketSession.objects.filter(pk=session_id, turn_owner=owner).update(turn_owner="", turn_heartbeat=None)


@database_sync_to_async
def turn_running(session_id: uuid.UUID) -> bool:
    """True while some live process holds this session's turn."""
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

    def clear(self) -> None:
        with self._lock:
            self._handlers.clear()

    async def __call__(self, message: dict[str, Any]) -> bool:
        with self._lock:
            handler = self._handlers.get(uuid.UUID(message["session"]))
        if handler is None:
            return False
        await handler()
        return True


stop_handlers = StopHandlers()


class TurnClaim:
    """``async with TurnClaim(session_id):`` waits for and holds the session's turn. The claim
    lasts as long as this process is alive; no per-turn heartbeat is needed.

    Two pieces of database work ride on the claim's own trips to the database: ``prelude``
    (synchronous ORM code, run once the claim is won; its result, or the exception it raised,
    is ``prelude_result``) and ``settle(send, outcome)``, the outcome of the send the turn
    answered, recorded when the claim is released."""

    def __init__(self, session_id: uuid.UUID, prelude: Callable[[], Any] | None = None) -> None:
        self.session_id = session_id
        self.prelude = prelude
        self.prelude_result: Any = None
        self._owner = ""
        self._settle: tuple[uuid.UUID, str] | None = None

    def settle(self, send: uuid.UUID, outcome: str) -> None:
        self._settle = (send, outcome)

    async def __aenter__(self) -> "TurnClaim":
        self._owner = await mailbox.channel()
        while True:
            claimed, self.prelude_result = await _try_claim(self.session_id, self._owner, self.prelude)
            if claimed:
                return self
            await asyncio.sleep(CLAIM_POLL)

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.shield(_release(self.session_id, self._owner, self._settle))


async def request_remote_stop(session_id: uuid.UUID) -> bool:
    """Ask the process running this session's turn (if another one) to stop it."""
    owner = await _turn_owner(session_id)
    if not owner or owner == await mailbox.channel():
        return False
    await mailbox.send(owner, {"type": "turn.stop", "session": str(session_id)})
    return True
