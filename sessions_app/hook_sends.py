"""Sends of hooks-API apps: accepted like every send, answered by the session's ``on_message``.

The same acceptance as the engine runtime: the AcceptedMessage row (the message id is the
idempotency key) is committed and ``chat-user-message`` is on the thread's bus before the
client's ack. The send is then held by this process (``holder``) and queued on the session:
when its turn begins its user step is transcribed and shown to every tab, then
``on_message`` runs, and the turn's outcome is recorded on the row. A repeat of the message
id (a resend after a lost ack) gets the same answer and runs nothing. A send whose holder
died is taken over by the process holding the session's socket (``sessions_app.recovery``):
re-run if its turn never began, closed with a visible error if it died mid-turn.
"""

import asyncio
import functools
import logging
import uuid
from dataclasses import dataclass
from typing import Any, cast

from media_app.elements import attach_uploads
from sessions_app import metrics, turn_statements
from sessions_app.accepting import accept_send
from sessions_app.chat.message import Message
from sessions_app.database import database_sync_to_async
from sessions_app.live import LiveSession
from sessions_app.mailbox import mailbox
from sessions_app.processes import live_addresses
from sessions_app.runtime import transcript
from sessions_app.runtime.chat_session import SERVER_STOPPED_TEXT
from sessions_app.thread_bus import publish_accepted
from sessions_app.turns import TurnClaim, run_claimed_prelude, turn_fence
from threads_app import selectors
from threads_app.models import AcceptedMessage, Thread
from threads_app.services import (
    fail_pending_sends_of_session,
    record_queued,
    repeated_send,
    take_over_send,
)

logger = logging.getLogger(__name__)


async def accept_and_answer(
    live: LiveSession,
    thread: Thread,
    message_id: uuid.UUID,
    text: str,
    *,
    retry: bool = False,
    upload_ids: list[uuid.UUID] | None = None,
) -> dict[str, Any]:
    """Accept a hooks-API send and queue its turn; answered once the row is committed. The
    uploads it names become elements of its user step before the turn is queued.

    A send that finds the session idle here (nothing running or waiting) is accepted, its
    turn claimed and its user step written in one database call (``_accept_claiming``);
    otherwise its turn is claimed when it begins, behind the work before it."""
    queued = live.will_queue()
    holder = await mailbox.channel()
    if not retry and not upload_ids and await live.reserve_turn():
        return await _accept_claiming_turn(live, thread, message_id, text, holder)
    acceptance = await accept_send(
        thread=thread,
        author=live.user,
        message_id=message_id,
        text=text,
        source=AcceptedMessage.Source.HOOK,
        session_id=live.id,
        holder=holder,
        retry=retry,
        queued=queued,
    )
    record = acceptance.record
    answer = {"threadId": str(thread.pk), "messageId": str(message_id)}
    if not acceptance.fresh:  # a repeat (a resend after a lost ack): the same answer
        return {**answer, "queued": bool(record.queued)}
    if upload_ids:
        await database_sync_to_async(attach_uploads)(live.user.pk, thread.pk, record.pk, upload_ids)
    # A revived send (``retry`` of a failed one) may carry files attached when it was first accepted.
    live.answer_send(record, with_attachments=bool(upload_ids) or acceptance.revived)
    if acceptance.revived:  # the revived row's ``queued`` was cleared
        await database_sync_to_async(record_queued)(record.pk, queued)
    return {**answer, "queued": queued}


@dataclass(frozen=True)
class _Accepted:
    record: AcceptedMessage
    created: bool
    claimed: int  # the turn was claimed in the same call: its claim's token (0: not claimed)
    user_step: Any  # the user step written then (or the exception its write raised)


def _accept_claiming(
    live: LiveSession, thread: Thread, message_id: uuid.UUID, text: str, owner: str
) -> _Accepted:
    """The send's INSERT and (when it made the record) the turn's claim, one statement
    (``turn_statements.accept_claiming``), then the user step: one database call. Not one
    transaction: the INSERT commits whether or not the claim is won, so a claim lost to
    another process (which then answers the sends before this one) leaves the send accepted
    and waiting for its turn like any other."""
    record, epoch = turn_statements.accept_claiming(
        owner,
        id=AcceptedMessage.key(thread.pk, message_id),
        client_id=message_id,
        thread=thread,
        box_id=thread.box_id,
        author=live.user,
        text=text,
        images=[],
        source=AcceptedMessage.Source.HOOK,
        session_id=live.id,
        holder=owner,
        queued=False,
    )
    if record is None:  # the key is taken: a repeat of the send (or a conflict)
        key = AcceptedMessage.key(thread.pk, message_id)
        repeat = repeated_send(
            key, author=live.user, text=text, images=[], source=AcceptedMessage.Source.HOOK
        )
        return _Accepted(repeat, False, 0, None)
    if not epoch:
        return _Accepted(record, True, 0, None)
    step = run_claimed_prelude(
        turn_fence(live.id, owner, epoch), functools.partial(live.transcribe_send, record)
    )
    return _Accepted(record, True, epoch, step)


async def _accept_claiming_turn(
    live: LiveSession, thread: Thread, message_id: uuid.UUID, text: str, owner: str
) -> dict[str, Any]:
    """``accept_and_answer`` with the turn lock reserved (``live.reserve_turn``): one database
    call accepts, claims and transcribes; the turn then runs with what it wrote."""
    answer = {"threadId": str(thread.pk), "messageId": str(message_id)}
    try:
        accepted = await database_sync_to_async(_accept_claiming)(live, thread, message_id, text, owner)
    except BaseException:
        live.release_reservation()
        raise
    record = accepted.record
    if not accepted.claimed:
        live.release_reservation()
        if not accepted.created:  # a repeat (a resend after a lost ack): the same answer
            return {**answer, "queued": bool(record.queued)}
        await publish_accepted(record, author=live.user.get_username(), image_count=0)
        live.answer_send(record, with_attachments=False)
        return {**answer, "queued": False}
    announced = asyncio.Event()
    # No await between the claim won and the turn that releases it.
    live.answer_claimed_send(
        record, TurnClaim.taken(live.id, owner, accepted.claimed, accepted.user_step), announced
    )
    try:
        await publish_accepted(record, author=live.user.get_username(), image_count=0)
    finally:
        live.start_after_ack(announced)  # the consumer sets it once this answer's ack is out
    return {**answer, "queued": False}


async def drop_waiting(live: LiveSession, reason: str) -> list[uuid.UUID]:
    """Drop the session's sends still waiting for their turn (a stop): marked failed and
    reported to the client as not sent."""
    dropped = live.drop_waiting()
    if dropped:
        await transcript.mark_failed([send.pk for send in dropped], reason)
        for send in dropped:
            await live.emit(
                "message_failed",
                {"threadId": str(live.thread_id), "messageId": str(send.client_id), "reason": reason},
            )
    return [send.pk for send in dropped]


def _orphans(session_ids: list[uuid.UUID]) -> list[AcceptedMessage]:
    """Hooks-API sends of these sessions that no live process holds and that are not settled."""
    return selectors.orphaned_hook_sends(session_ids, live_holders=live_addresses())


async def recover(sessions: list[LiveSession]) -> int:
    """Take over the orphaned sends of sessions whose socket this process holds: re-run the
    ones whose turn never began, close the ones cut mid-turn with an error. Returns how many."""
    if not sessions:
        return 0
    by_id = {live.id: live for live in sessions}
    me = await mailbox.channel()
    taken = 0
    for accepted in await database_sync_to_async(_orphans)(list(by_id)):
        live = by_id[cast(uuid.UUID, accepted.session_id)]  # _orphans selects by session_id
        if live.cleared or not await database_sync_to_async(take_over_send)(
            accepted.pk, previous_holder=accepted.holder, holder=me
        ):
            continue
        taken += 1
        metrics.recovered.labels(
            "send_rerun" if accepted.state == AcceptedMessage.State.PENDING else "send_closed"
        ).inc()
        if accepted.state == AcceptedMessage.State.PENDING:
            logger.info("re-running send %s of session %s (its holder died)", accepted.pk, live.id)
            live.answer_send(accepted)  # what it named is not known here: its elements are read
        else:
            logger.info(
                "closing send %s of session %s (its turn died with its process)", accepted.pk, live.id
            )
            await _close_cut_turn(live, accepted.pk)
    return taken


async def _close_cut_turn(live: LiveSession, message_id: uuid.UUID) -> None:
    token = live.activate()
    try:
        await Message(SERVER_STOPPED_TEXT, author="Error", is_error=True).send()
    finally:
        live.deactivate(token)
    await transcript.settle_turn([message_id], AcceptedMessage.Outcome.ERROR)


async def fail_unanswered(live: LiveSession) -> None:
    """The session ended: its sends that never got a turn can no longer be answered."""
    live.drop_waiting()
    await database_sync_to_async(fail_pending_sends_of_session)(live.id, AcceptedMessage.Failure.SERVER)
