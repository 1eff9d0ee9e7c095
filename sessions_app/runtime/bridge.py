"""Where the socket lifecycle meets the engine runtime (apps that ``use_engine_runtime()``).

A user message is accepted (its AcceptedMessage row committed) before the engine sees it; the
thread's ``ChatSession`` then takes it now or queues it. The session lives in the process that
owns the thread's box (``ownership``): when that is another process, the request goes to its
mailbox and the answer comes back. What a session emits goes to every web session watching
the thread (its audience), wherever their sockets are.
"""

import asyncio
import contextlib
import logging
import threading
import uuid
from typing import Any

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer

from sessions_app.emitter import emit_to_session
from sessions_app.mailbox import MailboxError, mailbox
from sessions_app.runtime.chat_session import ChatSession
from sessions_app.runtime.engines.base import UserTurn
from sessions_app.runtime.ownership import owner_of
from sessions_app.runtime.pool import pools
from threads_app.models import Box, Thread
from threads_app.services import accept_message, record_queued, settled_queued
from threads_app.wire import iso

logger = logging.getLogger(__name__)


class Audience:
    """The web sessions watching one thread's interactive session."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sessions: set[uuid.UUID] = set()

    def add(self, session_id: uuid.UUID) -> None:
        with self._lock:
            self._sessions.add(session_id)

    def discard(self, session_id: uuid.UUID) -> None:
        with self._lock:
            self._sessions.discard(session_id)

    async def __call__(self, event: str, data: Any) -> None:
        with self._lock:
            sessions = list(self._sessions)
        for session_id in sessions:
            await emit_to_session(session_id, event, data)


class Audiences:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_thread: dict[uuid.UUID, Audience] = {}

    def of(self, thread_id: uuid.UUID) -> Audience:
        with self._lock:
            return self._by_thread.setdefault(thread_id, Audience())

    def leave_all(self, session_id: uuid.UUID) -> None:
        with self._lock:
            audiences = list(self._by_thread.values())
        for audience in audiences:
            audience.discard(session_id)


audiences = Audiences()


@database_sync_to_async
def _box_of(thread_id: uuid.UUID) -> Box | None:
    thread = Thread.objects.select_related("box").filter(pk=thread_id).first()
    return thread.box if thread is not None else None


# --- the owner's side: what runs in the process holding the box's pool ------------------------


async def _chat_session(box: Box, thread_id: uuid.UUID, author: str) -> ChatSession:
    pool = pools.for_box(box.id, box.engine, box.engine_options)
    return await pool.chat_session(thread_id, emit=audiences.of(thread_id), author=author)


async def _submit_here(request: dict[str, Any]) -> bool:
    thread_id = uuid.UUID(request["thread"])
    if request.get("session"):
        audiences.of(thread_id).add(uuid.UUID(request["session"]))
    # The thread's session is usually open already: only a new one needs the box's engine.
    session = pools.find_chat_session(thread_id)
    if session is None:
        box = await _box_of(thread_id)
        assert box is not None
        session = await _chat_session(box, thread_id, request["author"])
    turn = UserTurn(
        text=request["text"],
        images=list(request.get("images") or []),
        accepted_ids=[uuid.UUID(request["message"])],
    )
    return session.submit_soon(turn)


async def _watch_here(request: dict[str, Any]) -> bool:
    thread_id = uuid.UUID(request["thread"])
    audiences.of(thread_id).add(uuid.UUID(request["session"]))
    session = pools.find_chat_session(thread_id)
    return session is not None and session.is_busy()


async def _stop_here(request: dict[str, Any]) -> bool:
    session = pools.find_chat_session(uuid.UUID(request["thread"]))
    if session is None or not session.is_running():
        return False
    await session.stop()
    return True


async def _forget_here(request: dict[str, Any]) -> None:
    audiences.leave_all(uuid.UUID(request["session"]))


async def _integration_here(request: dict[str, Any]) -> str:
    """An integration thread's message (``sessions_app.integrations``, imported here lazily: it
    imports this module)."""
    from sessions_app.integrations import accept_here

    return await accept_here(request)


HANDLERS = {
    "runtime.submit": _submit_here,
    "runtime.watch": _watch_here,
    "runtime.stop": _stop_here,
    "runtime.forget": _forget_here,
    "runtime.integration": _integration_here,
}
for _kind, _handler in HANDLERS.items():
    mailbox.register(_kind, _handler)


async def _at_owner(box_id: uuid.UUID, request: dict[str, Any]) -> Any:
    """Run ``request`` where the box's pool lives: here, or in the owner's process."""
    owner, mine = await owner_of(box_id)
    if not mine:
        try:
            return await mailbox.request(owner, request)
        except MailboxError:
            # The owner did not answer (it may have just died): take the box over if its
            # claim has gone stale, else give up on this request.
            owner, mine = await owner_of(box_id, fresh=True)
            if not mine:
                raise
    return await HANDLERS[request["type"]](request)


# --- what the lifecycle calls ----------------------------------------------------------------


def thread_group(thread_id: uuid.UUID) -> str:
    """The channel-layer group of every socket showing this thread (the thread's bus)."""
    return f"thread.{thread_id.hex}"


SETTLE_POLL = 0.02
SETTLE_WAIT = 10.0


async def _settled_queued(message_id: uuid.UUID) -> bool:
    """The first answer's ``queued`` for a repeated message id; waits while that first
    request is still in flight (it records the value right before answering)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + SETTLE_WAIT
    while (queued := await database_sync_to_async(settled_queued)(message_id)) is None:
        if loop.time() > deadline:
            return True  # accepted and durable; it is waiting somewhere
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
) -> dict[str, Any]:
    """The one acceptance path of every send (socket ``client_message`` and the HTTP API).

    The AcceptedMessage row is committed and ``chat-user-message`` is on the thread's bus
    before the answer; then the message goes to the thread's ChatSession (now, or queued).
    The message id is the idempotency key: a repeat, also a concurrent one, gets the same
    answer and makes no second record. Raises MessageConflict for a reused id with other
    content.
    """
    images = images or []
    accepted, created = await database_sync_to_async(accept_message)(
        message_id=message_id, thread=thread, author=user, text=text, images=images
    )
    answer = {"threadId": str(thread.pk), "messageId": str(message_id)}
    if not created:
        return {**answer, "queued": await _settled_queued(message_id)}
    await get_channel_layer().group_send(
        thread_group(thread.pk),
        {
            "type": "thread.event",
            "event": "chat-user-message",
            "data": {
                "threadId": str(thread.pk),
                "messageId": str(message_id),
                "text": text,
                "imageCount": len(images),
                "author": user.get_username(),
                "acceptedAt": iso(accepted.accepted_at),
            },
        },
    )
    request = {
        "type": "runtime.submit",
        "thread": str(thread.pk),
        "session": str(session_id) if session_id else None,
        "author": user.get_username(),
        "message": str(message_id),
        "text": text,
        "images": images,
    }
    try:
        queued = bool(await _at_owner(thread.box_id, request))
    except MailboxError:
        # Accepted and durable: the box's next owner re-queues it when it opens the thread.
        logger.warning("box %s owner unreachable; message %s stays pending", thread.box_id, message_id)
        queued = True
    await database_sync_to_async(record_queued)(message_id, queued)
    return {**answer, "queued": queued}


async def watch(session_id: uuid.UUID, thread_id: uuid.UUID) -> bool:
    """A web session opened this thread: it sees what the thread's session streams.
    Returns whether a turn is running on the thread right now."""
    box = await _box_of(thread_id)
    if box is None:
        return False
    try:
        return bool(
            await _at_owner(
                box.id, {"type": "runtime.watch", "thread": str(thread_id), "session": str(session_id)}
            )
        )
    except MailboxError:
        return False


async def stop(thread_id: uuid.UUID) -> bool:
    """Interrupt the thread's running turn and clear its queue; True if there was a run."""
    box = await _box_of(thread_id)
    if box is None:
        return False
    return bool(await _at_owner(box.id, {"type": "runtime.stop", "thread": str(thread_id)}))


async def forget(session_id: uuid.UUID, thread_id: uuid.UUID) -> None:
    box = await _box_of(thread_id)
    audiences.leave_all(session_id)
    if box is not None:
        with contextlib.suppress(MailboxError):
            await _at_owner(box.id, {"type": "runtime.forget", "session": str(session_id)})
