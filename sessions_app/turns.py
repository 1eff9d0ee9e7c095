"""Who runs a session's turn right now, across processes, and how to stop it from anywhere.

A turn (a hook run) is claimed in the session record with a conditional UPDATE that names the
claiming process's mailbox address. A second process that receives a message for the same
session waits for the claim, so hooks of one session never overlap even when the socket moved
between processes mid-turn. A claim held by a dead process (``sessions_app.processes``) is
free and may be taken over.

Each claim carries a fencing token (``turn_epoch``, ``threads_app.fencing``). While the turn
runs, its task writes under it (``fencing.current``): the hook's steps, the send's outcome
and the release land only while the claim is this process's. A process that stalled past
its lease and was taken over finds its writes refused when it wakes (``TurnClaim.lost``): the
turn's work is dropped, nothing more of it is shown, and one warning is logged.

``stop`` sent from the process holding the socket reaches the process running the turn
through that process's mailbox (``sessions_app.mailbox``).
"""

import asyncio
import contextvars
import logging
import threading
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from django.db.models import Q

from sessions_app import fence_checks, turn_statements
from sessions_app.database import database_sync_to_async
from sessions_app.mailbox import mailbox
from sessions_app.models import SocketSession
from sessions_app.processes import held_by_live_process
from threads_app import fencing
from threads_app.fencing import Fence, Fenced
from threads_app.models import AcceptedMessage

logger = logging.getLogger(__name__)

CLAIM_POLL = 0.05


def _fresh_claim() -> Q:
    """The turn is held by a live process (a dead process's claim is free)."""
    return ~Q(turn_owner="") & held_by_live_process("turn_owner")


def claim_turn(session_id: uuid.UUID, owner: str) -> int:
    """The conditional UPDATE that claims the session's turn for ``owner`` (synchronous: the
    accepting trip of a hooks-API send runs it beside its INSERT, ``hook_sends``): the lease
    rule of ``processes.claimable``, as SQL compiled once (``turn_statements``). Returns the
    claim's token, 0 when another live process holds the turn."""
    return turn_statements.claim(session_id, owner)


def run_prelude(prelude: Callable[[], Any]) -> Any:
    """``prelude``'s result, or the exception it raised (the turn raises it as it begins)."""
    try:
        return prelude()
    except Exception as exc:
        return exc


def turn_fence(session_id: uuid.UUID, owner: str, epoch: int) -> Fence:
    """The claim a session's turn writes under."""
    return Fence(SocketSession, session_id, "turn_owner", "turn_epoch", owner, epoch)


def run_claimed_prelude(fence: Fence, prelude: Callable[[], Any]) -> Any:
    """``run_prelude`` under the turn's claim (the user step records it)."""
    token = fencing.current.set(fence)
    try:
        return run_prelude(prelude)
    finally:
        fencing.current.reset(token)


@database_sync_to_async
def _try_claim(session_id: uuid.UUID, owner: str, prelude: Callable[[], Any] | None) -> tuple[int, Any]:
    """Claim the turn and, when that succeeded, run ``prelude`` in the same database call:
    ``(the claim's token or 0, its result or the exception it raised)``."""
    epoch = claim_turn(session_id, owner)
    if not epoch or prelude is None:
        return epoch, None
    return epoch, run_claimed_prelude(turn_fence(session_id, owner, epoch), prelude)


@database_sync_to_async
def _release(
    session_id: uuid.UUID,
    owner: str,
    epoch: int,
    settle: tuple[uuid.UUID, str] | None,
    last_write: Callable[[], Any] | None,
) -> tuple[Any, bool]:
    """The turn's last write (``last_write``: a reply ``Message.send()`` deferred, see
    ``sessions_app.replies``), the outcome of its send and the claim's release: one database
    call, the last two one statement on PostgreSQL, all under the claim's token. A last write
    that fails makes the outcome an error; its exception is returned for the turn to report.
    ``(written, released)``: released False when the claim had been taken over."""
    written: Any = None
    if last_write is not None:
        written = run_claimed_prelude(turn_fence(session_id, owner, epoch), last_write)
    if isinstance(written, Fenced):
        return written, False  # taken over: the outcome and the release are the new owner's
    settled = None
    if settle is not None:
        settled = (settle[0], AcceptedMessage.Outcome.ERROR if isinstance(written, Exception) else settle[1])
    try:
        released = turn_statements.release(session_id, owner, settled, epoch=epoch)
    except Exception:
        if settled is None:
            raise
        logger.exception("could not record the outcome of send %s", settled[0])
        released = turn_statements.release(session_id, owner, epoch=epoch)
    return written, released


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

    Database work rides on the claim's own trips to the database: ``prelude`` (synchronous
    ORM code, run once the claim is won; its result, or the exception it raised, is
    ``prelude_result``), and on the release the turn's last write (``write_last``; its result
    is ``last_written``) and ``settle(send, outcome)``, the outcome of the send the turn
    answered. ``TurnClaim.taken`` holds a claim already won by the trip that accepted the
    send (``hook_sends``): entering it costs no trip."""

    def __init__(self, session_id: uuid.UUID, prelude: Callable[[], Any] | None = None) -> None:
        self.session_id = session_id
        self.prelude = prelude
        self.prelude_result: Any = None
        self.last_written: Any = None
        # The claim's token, and whether the turn turned out to be taken over (its writes refused).
        self.epoch = 0
        self.lost = False
        self._fence_token: contextvars.Token[Fence | None] | None = None
        self._owner = ""
        self._held = False
        self._settle: tuple[uuid.UUID, str] | None = None
        self._last_write: Callable[[], Any] | None = None

    @classmethod
    def taken(cls, session_id: uuid.UUID, owner: str, epoch: int, prelude_result: Any) -> "TurnClaim":
        """A claim ``owner`` already holds under ``epoch``, with its prelude's result."""
        claim = cls(session_id)
        claim._owner, claim._held, claim.prelude_result = owner, True, prelude_result
        claim.epoch = epoch
        return claim

    @property
    def fence(self) -> Fence:
        return turn_fence(self.session_id, self._owner, self.epoch)

    def refused(self, exc: BaseException) -> bool:
        """Whether ``exc`` is this claim's writes being refused (the turn was taken over)."""
        return isinstance(exc, Fenced) and exc.fence == self.fence

    def _hold(self) -> "TurnClaim":
        """From here on the task's writes are made under this claim."""
        self._fence_token = fencing.current.set(self.fence)
        fence_checks.note_taken(self.fence)
        return self

    def settle(self, send: uuid.UUID, outcome: str) -> None:
        self._settle = (send, outcome)

    def write_last(self, write: Callable[[], Any]) -> None:
        """Run ``write`` (synchronous ORM code) in the release's database call, first."""
        self._last_write = write

    async def __aenter__(self) -> "TurnClaim":
        if self._held:
            return self._hold()
        self._owner = await mailbox.channel()
        while True:
            self.epoch, self.prelude_result = await _try_claim(self.session_id, self._owner, self.prelude)
            if self.epoch:
                return self._hold()
            await asyncio.sleep(CLAIM_POLL)

    async def __aexit__(self, *exc: object) -> None:
        try:
            self.last_written, released = await asyncio.shield(
                _release(self.session_id, self._owner, self.epoch, self._settle, self._last_write)
            )
        finally:
            if self._fence_token is not None:
                fencing.current.reset(self._fence_token)
                self._fence_token = None
        if not released and not self.lost:
            self.lost = True
            logger.warning(
                "the turn of session %s was taken over while this process ran it (token %d); its "
                "outcome and last reply were dropped",
                self.session_id,
                self.epoch,
            )


async def request_remote_stop(session_id: uuid.UUID) -> bool:
    """Ask the process running this session's turn (if another one) to stop it."""
    owner = await _turn_owner(session_id)
    if not owner or owner == await mailbox.channel():
        return False
    await mailbox.send(owner, {"type": "turn.stop", "session": str(session_id)})
    return True
