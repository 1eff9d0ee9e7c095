"""``ChatSessionPool``: one per box, in the process that serves the box's sessions.

It creates, finds, parks and evicts the box's sessions:

- interactive ``ChatSession``s, one per thread, least recently used evicted past
  ``MAX_CHAT_SESSIONS`` (eviction calls ``stop()``);
- integration ``ChatThreadSession``s, of which one is active: a message for another thread
  parks the active one (after its in-flight turn) before the new one runs.
"""

import asyncio
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from sessions_app.runtime import transcript
from sessions_app.runtime.chat_session import ChatSession, Emit
from sessions_app.runtime.engines import Engine, get_engine
from sessions_app.runtime.engines.base import UserTurn
from sessions_app.runtime.thread_session import ChatThreadSession, TurnResponse

MAX_CHAT_SESSIONS = 32

EngineFactory = Callable[[], Engine]


class ChatSessionPool:
    def __init__(self, box_id: uuid.UUID, engine_factory: EngineFactory) -> None:
        self.box_id = box_id
        self.engine_factory = engine_factory
        self.chat_sessions: OrderedDict[uuid.UUID, ChatSession] = OrderedDict()
        self.thread_sessions: dict[uuid.UUID, ChatThreadSession] = {}
        self.active_thread: uuid.UUID | None = None
        self._activation = asyncio.Lock()

    # --- interactive ------------------------------------------------------------------------

    async def chat_session(self, thread_id: uuid.UUID, *, emit: Emit, author: str = "user") -> ChatSession:
        session = self.chat_sessions.get(thread_id)
        if session is None:
            session = ChatSession(
                thread_id=thread_id,
                engine=self.engine_factory(),
                emit=emit,
                engine_session_id=await transcript.load_engine_session_id(thread_id),
                author=author,
            )
            self.chat_sessions[thread_id] = session
            # A turn the thread's previous runner left open ends with a visible error; sends
            # accepted but never transcribed (a crash, a restart, a dead owner) go first.
            await session.close_orphaned_turns()
            session.recover(await transcript.pending_turns(thread_id))
            await self._evict_beyond_limit()
        self.chat_sessions.move_to_end(thread_id)
        return session

    async def _evict_beyond_limit(self) -> None:
        while len(self.chat_sessions) > MAX_CHAT_SESSIONS:
            idle = next((t for t, s in self.chat_sessions.items() if not s.is_busy() and not s.queue), None)
            if idle is None:
                return
            await self.chat_sessions.pop(idle).stop()

    async def evict(self, thread_id: uuid.UUID) -> None:
        session = self.chat_sessions.pop(thread_id, None)
        if session is not None:
            await session.stop()

    # --- integrations ---------------------------------------------------------------------------

    async def activate(self, thread_id: uuid.UUID, *, author: str = "user") -> ChatThreadSession:
        """Make ``thread_id`` the box's active thread session, parking the previous one."""
        async with self._activation:
            if self.active_thread is not None and self.active_thread != thread_id:
                await self.thread_sessions[self.active_thread].park()
            session = self.thread_sessions.get(thread_id)
            if session is None:
                session = ChatThreadSession(
                    thread_id=thread_id,
                    engine=self.engine_factory(),
                    engine_session_id=await transcript.load_engine_session_id(thread_id),
                    author=author,
                )
                self.thread_sessions[thread_id] = session
            self.active_thread = thread_id
            return session

    async def send_to_thread(
        self, thread_id: uuid.UUID, turn: UserTurn, *, author: str = "user"
    ) -> TurnResponse:
        session = await self.activate(thread_id, author=author)
        return await session.send(turn)

    def runs_open(self) -> int:
        return sum(s.runs_open for s in self.thread_sessions.values()) + sum(
            s.runs_open for s in self.chat_sessions.values()
        )

    async def close(self) -> None:
        session: ChatSession | ChatThreadSession
        for session in list(self.chat_sessions.values()):
            await session.stop()
        for session in list(self.thread_sessions.values()):
            await session.stop()


class Pools:
    """This process's pools, one per box. Guarded by a lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pools: dict[uuid.UUID, ChatSessionPool] = {}

    def for_box(self, box_id: uuid.UUID, engine: str, options: dict[str, Any]) -> ChatSessionPool:
        with self._lock:
            pool = self._pools.get(box_id)
            if pool is None:
                pool = self._pools[box_id] = ChatSessionPool(box_id, lambda: get_engine(engine, options))
            return pool

    def all(self) -> list[ChatSessionPool]:
        with self._lock:
            return list(self._pools.values())

    def find_chat_session(self, thread_id: uuid.UUID) -> ChatSession | None:
        for pool in self.all():
            session = pool.chat_sessions.get(thread_id)
            if session is not None:
                return session
        return None

    def clear(self) -> None:
        with self._lock:
            self._pools.clear()


pools = Pools()
