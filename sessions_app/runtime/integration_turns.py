"""Integration turns: an integration's message to one of its threads, in the box's owner.

The view (``sessions_app.views.IntegrationMessageView``) calls ``submit``; the turn runs in
the process that owns the box (``routing``), through the box's pool and the thread's
``ChatThreadSession``, which delivers complete responses only. The user step and the
assistant steps land in the transcript as for any turn; when the box has a ``webhook_url``
the complete response is POSTed there, signed (``sessions_app.webhooks``).

A busy thread refuses, it does not queue: a ChatThreadSession is queue-free by design, so a
message for a thread whose previous integration message is still being answered is refused
(``BUSY``) and *not* accepted: no record is made, nothing is pending, and the integration
sends it again (same id) after the response it is waiting for. The check and the acceptance
happen together in the owner (under the box's lock), so two sends cannot both pass it; a
repeat of the message being answered is still ``ACCEPTED``. Messages for *different* threads
of one box are all accepted: the pool runs one integration thread at a time and parks the
active one after its turn, so they take turns.
"""

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Coroutine
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ObjectDoesNotExist
from django.db import transaction

from chatproject import tracing
from sessions_app import webhook_tasks
from sessions_app.accepting import accept_send
from sessions_app.database import database_sync_to_async
from sessions_app.mailbox import MailboxError
from sessions_app.runtime import transcript
from sessions_app.runtime.chat_session import SERVER_STOPPED_TEXT
from sessions_app.runtime.engines.base import UserTurn
from sessions_app.runtime.pool import pools
from sessions_app.runtime.routing import at_box_owner, box_of
from sessions_app.runtime.thread_session import LOST, TurnResponse
from threads_app.fencing import Fence, Fenced
from threads_app.models import AcceptedMessage, Box, Thread
from threads_app.selectors import accepted_exists, box_by_id
from threads_app.services import MessageConflict, fail_sends, record_queued, settle_sends

logger = logging.getLogger(__name__)

ACCEPTED, BUSY, CONFLICT, GONE, UNAVAILABLE = "accepted", "busy", "conflict", "gone", "unavailable"


# --- the requesting side ---------------------------------------------------------------------


async def submit(*, user: Any, thread: Thread, box: Box, message_id: uuid.UUID, text: str) -> str:
    """Hand the message to the box's owner; ACCEPTED, BUSY, CONFLICT or UNAVAILABLE."""
    request = {
        "type": "runtime.integration",
        "thread": str(thread.pk),
        "user": user.pk,
        "author": user.get_username(),
        "message": str(message_id),
        "text": text,
    }
    try:
        answer = await at_box_owner(box.id, request, accept_here)
    except MailboxError:
        # It may have been accepted all the same (a late answer): resending the same id is safe.
        logger.warning("box %s owner did not answer for integration message %s", box.id, message_id)
        return UNAVAILABLE
    return str(answer)


# --- the owner's side: what runs in the process holding the box's pool -------------------------


class IntegrationTurns:
    """This (owner) process's integration turns: threads with a turn accepted and not yet
    answered, the per-box locks that make the busy check and the acceptance one step, and
    the running turn tasks. Locks are dropped when nobody holds or waits for them."""

    def __init__(self) -> None:
        self.in_flight: set[uuid.UUID] = set()
        # Sends whose turn ended here and whose outcome is being recorded: no longer busy to
        # the next send, not yet settled in the database, so not to be taken for cut ones.
        self.settling: set[Any] = set()
        self.tasks: set[asyncio.Task[Any]] = set()
        self._box_locks: dict[uuid.UUID, asyncio.Lock] = {}

    @contextlib.asynccontextmanager
    async def box_lock(self, box_id: uuid.UUID) -> AsyncIterator[None]:
        lock = self._box_locks.setdefault(box_id, asyncio.Lock())
        try:
            async with lock:
                yield
        finally:
            if not lock.locked() and not getattr(lock, "_waiters", None):
                self._box_locks.pop(box_id, None)

    def start(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def clear(self) -> None:
        self.in_flight.clear()
        self.settling.clear()
        self._box_locks.clear()


integration_turns = IntegrationTurns()


def _thread_and_author(thread_id: uuid.UUID, user_id: Any) -> tuple[Thread, Any]:
    return Thread.objects.get(pk=thread_id), get_user_model().objects.get(pk=user_id)


def _busy(box: Box, thread_id: uuid.UUID) -> bool:
    if thread_id in integration_turns.in_flight:
        return True
    pool = pools.for_box(box.id, box.engine, box.engine_options)
    session = pool.thread_sessions.get(thread_id)
    chat = pool.chat_sessions.get(thread_id)  # the same thread opened interactively
    return bool(
        (session is not None and session.is_busy()) or (chat is not None and (chat.is_busy() or chat.queue))
    )


async def accept_here(request: dict[str, Any]) -> str:
    """The ``runtime.integration`` mailbox handler: accept the message and start its turn, or
    refuse it while the thread is busy (see the module docstring)."""
    thread_id = uuid.UUID(request["thread"])
    message_id = uuid.UUID(request["message"])
    box = await box_of(thread_id)
    if box is None:
        return GONE  # deleted since the view found it
    async with integration_turns.box_lock(box.id):
        # A repeat of an accepted message is answered as the first time, busy or not.
        if _busy(box, thread_id) and not await _exists(thread_id, message_id):
            return BUSY
        thread, author = await database_sync_to_async(_thread_and_author)(thread_id, request["user"])
        try:
            acceptance = await accept_send(
                thread=thread,
                author=author,
                message_id=message_id,
                text=request["text"],
                source=AcceptedMessage.Source.INTEGRATION,
            )
        except MessageConflict:
            return CONFLICT
        if not acceptance.fresh:
            return ACCEPTED
        integration_turns.in_flight.add(thread_id)
    send = acceptance.record
    try:
        await database_sync_to_async(record_queued)(send.pk, False)
    finally:
        integration_turns.start(_answer(box.id, send, request["author"]))
    return ACCEPTED


_exists = database_sync_to_async(accepted_exists)
_fresh_box = database_sync_to_async(box_by_id)


def _outcome(response: TurnResponse) -> str:
    """The send's recorded outcome for the turn's response."""
    if response.outcome == "interrupted":
        return AcceptedMessage.Outcome.INTERRUPTED
    return AcceptedMessage.Outcome.ERROR if response.is_error else AcceptedMessage.Outcome.REPLIED


async def _answer(box_id: uuid.UUID, send: AcceptedMessage, author: str) -> None:
    """Run the turn through the box's pool, record its outcome (so that a turn this process
    dies in is told from one it finished: ``recover``), then deliver the complete response."""
    thread_id, message_id = send.thread_id, send.client_id
    fence: Fence | None = None
    try:
        box = await _fresh_box(box_id)
        if box is None:
            return  # deleted since the message was accepted (and its records with it)
        pool = pools.for_box(box.id, box.engine, box.engine_options)
        session = await pool.activate(thread_id, author=author)
        fence = session.fence
        turn = UserTurn.of_send(send)
        turn.trace = tracing.carrier()  # the span the send was accepted in (traces on only)
        response = await session.send(turn)
        if response.outcome == LOST:
            return  # the box's new owner answers it (and delivers that answer)
        outcome = _outcome(response)
    except ObjectDoesNotExist:
        logger.warning("thread %s was deleted before message %s was answered", thread_id, message_id)
        return
    except Exception:
        logger.exception("integration turn for message %s on thread %s failed", message_id, thread_id)
        response = TurnResponse("The engine could not answer.", True, "error")
        outcome = AcceptedMessage.Outcome.ERROR
        with contextlib.suppress(Exception):
            await database_sync_to_async(fail_sends)([send.pk], AcceptedMessage.Failure.ENGINE, fence=fence)
    finally:
        integration_turns.in_flight.discard(thread_id)
    integration_turns.settling.add(send.pk)  # in the same step as the discard: no await between
    try:
        await _settle_and_deliver(box_id, send, outcome, response, fence)
    finally:
        integration_turns.settling.discard(send.pk)


async def _settle_and_deliver(
    box_id: uuid.UUID, send: AcceptedMessage, outcome: str, response: TurnResponse, fence: Fence | None
) -> None:
    """Record the send's outcome and queue its response's delivery in one transaction, under
    the claim the turn ran under: an owner taken over meanwhile (a stall past its lease) lost
    the send to the new owner, which closes and delivers it, so the old one delivers nothing;
    and a process that dies between the two leaves neither, so recovery answers the send."""
    try:
        delivered = await database_sync_to_async(settle_and_queue_delivery)(
            box_id, send, outcome, response, fence
        )
    except Fenced as exc:
        logger.warning("integration message %s: %s; its new owner answers it", send.client_id, exc)
        return
    except Exception:
        logger.exception("the response to integration message %s could not be recorded", send.client_id)
        return
    if not delivered:
        logger.info("integration message %s was settled by another turn; not delivered again", send.client_id)


def settle_and_queue_delivery(
    box_id: uuid.UUID, send: AcceptedMessage, outcome: str, response: TurnResponse, fence: Fence | None
) -> bool:
    """The sync half of ``_settle_and_deliver``: True when this call settled the send (and
    queued its delivery, if the box has a webhook)."""
    with transaction.atomic():
        if not settle_sends([send.pk], outcome, fence=fence):
            return False  # another turn (a recovery) settled it first: its delivery is the one
        _enqueue(box_id, send.thread_id, send.client_id, response)
    return True


def _enqueue(box_id: uuid.UUID, thread_id: uuid.UUID, message_id: uuid.UUID, response: TurnResponse) -> None:
    """Queue the response's delivery to the box's webhook, as the box's settings are now
    (durable: ``webhook_tasks``)."""
    box = box_by_id(box_id)
    if box is not None and box.webhook_url:
        webhook_tasks.enqueue(box, _payload(thread_id, message_id, response), trace=response.trace)


# --- recovery: integration sends a dead owner left -------------------------------------------------


@database_sync_to_async
def _still_open(send: AcceptedMessage) -> bool:
    return AcceptedMessage.objects.filter(pk=send.pk, state=send.state, outcome="").exists()


async def _close_cut_turn(box_id: uuid.UUID, send: AcceptedMessage) -> None:
    """A turn the box's previous owner began and never finished: it ends with a visible error
    step, and the integration gets that error at its webhook (it may send the message again)."""
    step = await transcript.write_engine_step(
        send.thread_id,
        f"error-{uuid.uuid4()}",
        type="assistant_message",
        name="Error",
        output=SERVER_STOPPED_TEXT,
        is_error=True,
    )
    response = TurnResponse(SERVER_STOPPED_TEXT, True, "error", [step["id"]])
    await _settle_and_deliver(box_id, send, AcceptedMessage.Outcome.ERROR, response, None)


async def recover(box_id: uuid.UUID, sends: list[AcceptedMessage]) -> int:
    """In the box's (new) owner: answer the integration sends a dead owner accepted and never
    transcribed, and close the turns it began and never finished; returns how many. Threads
    with a turn in flight here are left alone (their send is this process's own)."""
    done = 0
    async with integration_turns.box_lock(box_id):
        for send in sends:
            if send.thread_id in integration_turns.in_flight or send.pk in integration_turns.settling:
                continue
            # Read again: a turn of this process that ended after ``sends`` was read recorded
            # its outcome before leaving ``settling``, so it is not taken for a cut one.
            if not await _still_open(send):
                continue
            if send.state == AcceptedMessage.State.TRANSCRIBED:
                await _close_cut_turn(box_id, send)
            else:
                integration_turns.in_flight.add(send.thread_id)
                integration_turns.start(_answer(box_id, send, send.author.get_username()))
            done += 1
    return done


def _payload(thread_id: uuid.UUID, message_id: uuid.UUID, response: TurnResponse) -> dict[str, Any]:
    return {
        "threadId": str(thread_id),
        "messageId": str(message_id),
        "response": {
            "text": response.text,
            "isError": response.is_error,
            "outcome": response.outcome,
            "stepIds": list(response.step_ids),
        },
    }
