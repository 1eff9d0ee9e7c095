"""Where the socket lifecycle meets the engine runtime (apps that ``use_engine_runtime()``).

A user message is accepted (its AcceptedMessage row committed) and answered before the
engine sees it; the thread's ``ChatSession`` then takes it now or queues it. What the session
emits goes to every web session watching the thread (its audience).
"""

import threading
import uuid
from typing import Any

from channels.db import database_sync_to_async

from sessions_app.emitter import emit_to_session
from sessions_app.runtime.chat_session import ChatSession
from sessions_app.runtime.engines.base import UserTurn
from sessions_app.runtime.pool import pools
from threads_app.models import Box, Thread
from threads_app.services import accept_message


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
def _thread_and_box(thread_id: uuid.UUID) -> tuple[Thread, Box]:
    thread = Thread.objects.select_related("box").get(pk=thread_id)
    return thread, thread.box


async def chat_session_for(thread_id: uuid.UUID, *, author: str = "user") -> ChatSession:
    _thread, box = await _thread_and_box(thread_id)
    pool = pools.for_box(box.id, box.engine, box.engine_options)
    return await pool.chat_session(thread_id, emit=audiences.of(thread_id), author=author)


def existing_chat_session(thread_id: uuid.UUID) -> ChatSession | None:
    for pool in pools.all():
        session = pool.chat_sessions.get(thread_id)
        if session is not None:
            return session
    return None


async def submit(
    session_id: uuid.UUID, user: Any, thread_id: uuid.UUID, message_id: uuid.UUID, text: str
) -> dict[str, Any]:
    """Accept a user message and hand it to the thread's ChatSession; the answer comes first."""
    thread, _box = await _thread_and_box(thread_id)
    accepted, created = await database_sync_to_async(accept_message)(
        message_id=message_id, thread=thread, author=user, text=text
    )
    audiences.of(thread_id).add(session_id)
    answer = {"threadId": str(thread_id), "messageId": str(message_id)}
    if not created:
        return {**answer, "queued": accepted.state == accepted.State.PENDING}
    session = await chat_session_for(thread_id, author=user.get_username())
    queued = session.submit_soon(UserTurn(text=text, accepted_ids=[message_id]))
    return {**answer, "queued": queued}


def watch(session_id: uuid.UUID, thread_id: uuid.UUID) -> None:
    """A web session opened (or resumed) this thread: it sees what its session streams."""
    audiences.of(thread_id).add(session_id)


def forget(session_id: uuid.UUID) -> None:
    audiences.leave_all(session_id)


async def stop(thread_id: uuid.UUID) -> bool:
    """Interrupt the thread's running turn and clear its queue; True if there was a run."""
    session = existing_chat_session(thread_id)
    if session is None or not session.is_running():
        return False
    await session.stop()
    return True


def thread_busy(thread_id: uuid.UUID) -> bool:
    session = existing_chat_session(thread_id)
    return session is not None and session.is_busy()
