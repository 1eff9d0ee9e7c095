"""Interactive chats of engine-runtime apps: where the socket lifecycle meets a thread's
``ChatSession``.

A send is accepted (``accepting``) before the engine sees it; the thread's ChatSession then
takes it now or queues it. The session lives in the process that owns the thread, the first
one whose socket needed it (``ownership``, ``routing``): the ``*_here`` functions are what runs
there, called directly or through the owner's mailbox. What a session emits goes to every web session watching the thread (its
audience), wherever their sockets are.
"""

import asyncio
import contextlib
import functools
import logging
import threading
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from chatproject import tracing
from sessions_app import metrics, records
from sessions_app.accepting import accept_send
from sessions_app.database import database_sync_to_async
from sessions_app.emitter import emit_encoded
from sessions_app.event_frames import encode_event
from sessions_app.mailbox import MailboxError, mailbox
from sessions_app.runtime import transcript
from sessions_app.runtime.chat_session import ChatSession
from sessions_app.runtime.engines import can_rewind
from sessions_app.runtime.engines.base import UserTurn
from sessions_app.runtime.pool import BoxAtCapacity, pools
from sessions_app.runtime.routing import at_thread_owner, box_of
from sessions_app.thread_bus import publish_accepted
from threads_app.fencing import Fenced
from threads_app.models import AcceptedMessage, Box, Thread
from threads_app.services import record_queued, reopen_edited_send, settled_queued
from threads_app.wire import live_user_step

logger = logging.getLogger(__name__)


class Audience:
    """The web sessions watching one thread's interactive session."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sessions: set[uuid.UUID] = set()

    def add(self, session_id: uuid.UUID) -> None:
        with self._lock:
            self._sessions.add(session_id)

    def discard(self, session_id: uuid.UUID) -> bool:
        """Remove a watcher; True when nobody is left."""
        with self._lock:
            self._sessions.discard(session_id)
            return not self._sessions

    async def __call__(self, event: str, data: Any) -> None:
        with self._lock:
            sessions = list(self._sessions)
        if not sessions:
            return
        encoded = encode_event(event, [data])  # once for every watcher
        for session_id in sessions:
            await emit_encoded(session_id, encoded)


class Audiences:
    """Every thread's audience in this process; an audience nobody watches is dropped. A
    thread's ChatSession emits through ``emitter``, which finds the thread's audience at each
    emit, so a dropped audience and its successor are never confused."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_thread: dict[uuid.UUID, Audience] = {}

    def of(self, thread_id: uuid.UUID) -> Audience:
        with self._lock:
            return self._by_thread.setdefault(thread_id, Audience())

    def emitter(self, thread_id: uuid.UUID) -> Callable[[str, Any], Awaitable[None]]:
        async def emit(event: str, data: Any) -> None:
            with self._lock:
                audience = self._by_thread.get(thread_id)
            if audience is not None:
                await audience(event, data)

        return emit

    def leave_all(self, session_id: uuid.UUID) -> None:
        with self._lock:
            audiences = list(self._by_thread.items())
        for thread_id, audience in audiences:
            if audience.discard(session_id):
                with self._lock:
                    self._by_thread.pop(thread_id, None)

    def clear(self) -> None:
        with self._lock:
            self._by_thread.clear()


audiences = Audiences()


# --- the owner's side: what runs in the process running the thread's session ------------------


async def _chat_session(box: Box, thread_id: uuid.UUID, author: str) -> ChatSession:
    pool = pools.for_box(box.id, box.engine, box.engine_options)
    audience = audiences.of(thread_id)
    if pool.chat_sessions.get(thread_id) is None:
        # A new owner (after a takeover) knows no watchers yet: the sessions showing the
        # thread right now are in the database.
        for session_id in await database_sync_to_async(records.sessions_showing)(thread_id):
            audience.add(session_id)
    return await pool.chat_session(thread_id, emit=audiences.emitter(thread_id), author=author)


async def submit_here(
    request: dict[str, Any], *, box: Box | None = None, queued_by_turn: list[bool] | None = None
) -> bool:
    """``runtime.submit``: give an accepted send to its thread's session; True if it queues.
    ``box``: read by the send's accepting trip (a send handed over in its own process).
    ``queued_by_turn``: the caller records the answer's ``queued`` only when this holds no
    True: a send that starts a turn on a ready run at once has it recorded by its user step's
    write (``UserTurn.unqueued_ids``), which follows immediately, instead of a trip of its own."""
    thread_id = uuid.UUID(request["thread"])
    if request.get("session"):
        audiences.of(thread_id).add(uuid.UUID(request["session"]))
    # The box is read on every send (one indexed query, in the accepting trip when the send
    # is handed over here): an engine or options edited in the admin take effect on this turn
    # (the pool replaces an idle session built with the old).
    if box is None:
        box = await box_of(thread_id)
    assert box is not None
    try:
        session = await _chat_session(box, thread_id, request["author"])
    except BoxAtCapacity:
        # Every engine run of the box is busy: the send stays pending, and the recovery loop
        # hands it over once one is idle (it is answered, later).
        logger.info("box %s has no idle engine run; send %s waits for one", box.id, request["message"])
        return True
    turn = UserTurn(
        text=request["text"],
        images=list(request.get("images") or []),
        accepted_ids=[uuid.UUID(request["message"])],
        message_ids=[uuid.UUID(request["client_id"])],
        accepted_at=request.get("accepted_at"),
        trace=tracing.carrier(),  # the mailbox request's span when forwarded, else the send's
    )
    ready = session.ready_for_turn()
    queued = session.submit_soon(turn)
    if queued_by_turn is not None and ready and not queued:
        turn.unqueued_ids = list(turn.accepted_ids)  # the turn has not begun: it runs after this
        queued_by_turn.append(True)
    return queued


async def watch_here(request: dict[str, Any]) -> bool:
    """``runtime.watch``: a web session shows the thread; True while a turn runs."""
    thread_id = uuid.UUID(request["thread"])
    audiences.of(thread_id).add(uuid.UUID(request["session"]))
    session = pools.find_chat_session(thread_id)
    return session is not None and session.is_busy()


async def stop_here(request: dict[str, Any]) -> bool:
    """``runtime.stop``: interrupt the thread's turn and drop its queue; True if one ran."""
    session = pools.find_chat_session(uuid.UUID(request["thread"]))
    if session is None or not session.is_running():
        return False
    await session.stop()
    return True


async def forget_here(request: dict[str, Any]) -> None:
    """``runtime.forget``: a web session ended; it watches nothing any more."""
    audiences.leave_all(uuid.UUID(request["session"]))


# Why an edit is refused where the thread runs (``edit_here``).
EDIT_REFUSED_BY_ENGINE = (
    "this chat's engine remembers the conversation itself and cannot forget what followed "
    "the message, so it cannot answer an edited one"
)
EDIT_WAITS_FOR_TURN = "wait for the reply (or stop it) before editing a message"
EDIT_MOVED = "this chat moved to another server meanwhile; edit the message again"


async def edit_here(request: dict[str, Any]) -> str:
    """``runtime.edit``: a user changed a sent message (the thread, its user step's ``seq``,
    its send's key, the new ``text``). Once the thread's session is idle, the message and
    what followed it leave the transcript, the engine forgets those turns, every tab watching
    drops them, and the send, pending again with the new text, is answered as any send (its
    user step comes back under its client's id). Answers "" when done, else why not."""
    thread_id = uuid.UUID(request["thread"])
    if request.get("session"):
        audiences.of(thread_id).add(uuid.UUID(request["session"]))
    box = await box_of(thread_id)
    assert box is not None
    if not can_rewind(box.engine):
        return EDIT_REFUSED_BY_ENGINE
    removed: list[dict[str, Any]] = []

    async def cut() -> tuple[str | None, int]:
        conversation_id, fence = await transcript.load_runner_state(thread_id, await mailbox.channel())
        gone, turns_kept = await database_sync_to_async(reopen_edited_send)(
            thread_id, request["seq"], uuid.UUID(request["send"]), request["text"], fence=fence
        )
        removed.extend(gone)
        return conversation_id, turns_kept

    pool = pools.for_box(box.id, box.engine, box.engine_options)
    try:
        if not await pool.rewind(thread_id, cut):
            return EDIT_WAITS_FOR_TURN
    except Fenced:
        return EDIT_MOVED
    emit = audiences.emitter(thread_id)
    for step in removed:
        await emit("delete_message", live_user_step(step))
    await recover_thread(box.id, thread_id, request["author"])  # the send is pending again
    return ""


async def edit(
    thread_id: uuid.UUID, *, session_id: uuid.UUID, author: str, seq: int, send: uuid.UUID, text: str
) -> str:
    """Edit a sent message of an engine-runtime chat where the thread runs (``edit_here``);
    "" when done, else why not."""
    request = {
        "type": "runtime.edit",
        "thread": str(thread_id),
        "session": str(session_id),
        "author": author,
        "seq": seq,
        "send": str(send),
        "text": text,
    }
    return str(await at_thread_owner(thread_id, request, edit_here))


async def recover_thread(box_id: uuid.UUID, thread_id: uuid.UUID, author: str) -> None:
    """In the thread's owner: make sure the thread's ChatSession holds every send accepted for
    it and not transcribed, and has closed turns a dead runner left open."""
    session = pools.find_chat_session(thread_id)
    if session is None:
        box = await database_sync_to_async(Box.objects.get)(pk=box_id)
        try:
            await _chat_session(box, thread_id, author)  # a new session recovers on creation
        except BoxAtCapacity:
            return  # still pending: a later pass tries again
    else:
        session.recover(await transcript.pending_turns(thread_id))


# --- what the lifecycle and the send endpoint call ---------------------------------------------


SETTLE_POLL = 0.02
SETTLE_WAIT = 2.0


async def _first_answer(message_id: uuid.UUID) -> bool | None:
    """The first answer's ``queued`` for a repeated message id, waiting briefly while that
    first request is still in flight (it records the value right before answering). None
    when it never settled: the first request died before handing the send over."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + SETTLE_WAIT
    while (queued := await database_sync_to_async(settled_queued)(message_id)) is None:
        if loop.time() > deadline:
            return None
        await asyncio.sleep(SETTLE_POLL)
    return queued


async def accept_and_submit(
    *,
    user: Any,
    thread: Thread,
    message_id: uuid.UUID,
    text: str,
    images: list[dict[str, Any]] | None = None,
    session_id: uuid.UUID | None = None,
    retry: bool = False,
) -> dict[str, Any]:
    """A chat send of an engine-runtime app (socket ``client_message`` and the HTTP API):
    accepted, then given to the thread's ChatSession (now, or queued).

    A repeat gets the first answer; a repeat of a send whose first request died before
    handing it over hands it over now. Raises MessageConflict for a reused id with other
    content.
    """
    images = images or []
    acceptance = await accept_send(
        thread=thread,
        author=user,
        message_id=message_id,
        text=text,
        images=images,
        source=AcceptedMessage.Source.CHAT,
        retry=retry,
        with_read=lambda: Box.objects.filter(pk=thread.box_id).first(),
    )
    accepted = acceptance.record
    answer = {"threadId": str(thread.pk), "messageId": str(message_id)}
    if not acceptance.fresh:
        if accepted.state != AcceptedMessage.State.PENDING:
            return {**answer, "queued": bool(accepted.queued)}
        if (queued := await _first_answer(accepted.pk)) is not None:
            return {**answer, "queued": queued}
        logger.info("send %s was never handed over; handing it over now", message_id)
        await publish_accepted(accepted, author=user.get_username(), image_count=len(images))
    recorded_by_turn: list[bool] = []
    queued = await hand_over(
        accepted,
        author=user.get_username(),
        session_id=session_id,
        box=acceptance.read,
        queued_by_turn=recorded_by_turn,
    )
    if not recorded_by_turn:
        await database_sync_to_async(record_queued)(accepted.pk, queued)
    return {**answer, "queued": queued}


async def hand_over(
    accepted: AcceptedMessage,
    *,
    author: str,
    session_id: uuid.UUID | None = None,
    box: Box | None = None,
    queued_by_turn: list[bool] | None = None,
) -> bool:
    """Give an accepted send to its thread's ChatSession, wherever that runs.
    Returns whether it waits in a queue. When the owner cannot be reached (the channel layer
    is down, the owner died) the send stays pending: the recovery loop hands it over later.
    ``box`` and ``queued_by_turn`` go to ``submit_here`` when it runs in this process."""
    request = {
        "type": "runtime.submit",
        "thread": str(accepted.thread_id),
        "session": str(session_id) if session_id else None,
        "author": author,
        "message": str(accepted.pk),
        "client_id": str(accepted.client_id),
        "text": accepted.text,
        "images": list(accepted.images),
        "accepted_at": meter.accepted_wall if (meter := metrics.current_meter.get()) is not None else None,
    }
    try:
        here = functools.partial(submit_here, box=box, queued_by_turn=queued_by_turn)
        return bool(await at_thread_owner(accepted.thread_id, request, here))
    except Exception as exc:  # MailboxError, or the layer failing under the claim
        logger.warning(
            "thread %s owner unreachable (%r); send %s stays pending for recovery",
            accepted.thread_id,
            exc,
            accepted.pk,
        )
        return True


async def watch(session_id: uuid.UUID, thread_id: uuid.UUID) -> bool:
    """A web session opened this thread: it sees what the thread's session streams.
    Returns whether a turn is running on the thread right now."""
    box = await box_of(thread_id)
    if box is None:
        return False
    request = {"type": "runtime.watch", "thread": str(thread_id), "session": str(session_id)}
    try:
        return bool(await at_thread_owner(thread_id, request, watch_here))
    except MailboxError:
        return False


async def stop(thread_id: uuid.UUID) -> bool:
    """Interrupt the thread's running turn and clear its queue; True if there was a run."""
    box = await box_of(thread_id)
    if box is None:
        return False
    return bool(
        await at_thread_owner(thread_id, {"type": "runtime.stop", "thread": str(thread_id)}, stop_here)
    )


async def forget(session_id: uuid.UUID, thread_id: uuid.UUID) -> None:
    """A web session ended: it leaves every audience, here and in the thread's owner."""
    box = await box_of(thread_id)
    audiences.leave_all(session_id)
    if box is not None:
        with contextlib.suppress(MailboxError):
            await at_thread_owner(
                thread_id, {"type": "runtime.forget", "session": str(session_id)}, forget_here
            )
