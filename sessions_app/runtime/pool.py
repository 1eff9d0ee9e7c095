"""``BoxPool``: one per box in each process that runs sessions of the box (the threads it
owns, and the box's integration sessions where it owns the box; ``ownership``).

It creates, finds, parks and evicts the box's sessions:

- interactive ``ChatSession``s, one per thread, at most ``ENGINE_SESSIONS_PER_BOX`` per box and
  ``ENGINE_SESSIONS_PER_PROCESS`` in this process (the caps are per process: each process
  bounds what it runs): the least recently used idle one is closed
  to make room (``stop()``), and with none idle a new thread's session waits
  (``BoxAtCapacity``);
- integration ``ChatThreadSession``s, of which one is active: a message for another thread
  parks the active one (after its in-flight turn) before the new one runs;
- sessions idle for ``ENGINE_IDLE_TIMEOUT`` are closed (``close_idle``, from
  ``runtime.idle_runs``), their engine conversation ids kept for the next run.

A box edited in the admin takes effect on its next turn: callers pass the box's engine and
options as they read them per turn, and ``BoxPools.for_box`` reconfigures a pool built with
others. Sessions built before are replaced once idle (a turn in flight finishes on the old
engine first); when the engine itself changed, the threads' engine conversation ids are
forgotten, since one engine cannot resume another's conversation.
"""

import asyncio
import copy
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any, cast

from django.conf import settings

from sessions_app import metrics
from sessions_app.database import database_sync_to_async
from sessions_app.mailbox import mailbox
from sessions_app.runtime import transcript
from sessions_app.runtime.chat_session import ChatSession, Emit
from sessions_app.runtime.engines import Engine, get_engine
from sessions_app.runtime.engines.base import Rewinds, UserTurn
from sessions_app.runtime.ownership import known_owners
from sessions_app.runtime.thread_session import ChatThreadSession, TurnResponse
from threads_app.services import forget_engine_sessions


class BoxAtCapacity(Exception):
    """The box holds ``ENGINE_SESSIONS_PER_BOX`` sessions and none is idle: a new thread's
    session waits (its sends stay pending; the recovery loop hands them over once one frees)."""


EngineFactory = Callable[[], Engine]
# A box's engine name and options, as the pool was built with them.
EngineConfig = tuple[str, dict[str, Any]]


class BoxPool:
    def __init__(
        self,
        box_id: uuid.UUID,
        engine_factory: EngineFactory,
        *,
        config: EngineConfig | None = None,
        process: "BoxPools | None" = None,
    ) -> None:
        self.box_id = box_id
        # The process's pools, for its cap on engine runs across boxes (None: this box only).
        self.process = process
        self.engine_factory = engine_factory
        self.config = config
        self.chat_sessions: OrderedDict[uuid.UUID, ChatSession] = OrderedDict()
        self.thread_sessions: dict[uuid.UUID, ChatThreadSession] = {}
        self.active_thread: uuid.UUID | None = None
        self._activation = asyncio.Lock()
        self._creating = asyncio.Lock()
        # Bumped by each reconfigure; each session remembers the generation and engine name
        # it was built with (chat and integration sessions of one thread separately).
        self.generation = 0
        self._built: dict[tuple[str, uuid.UUID], tuple[int, str | None]] = {}
        # When each session was last asked for or seen busy (monotonic), for ``close_idle``.
        self._used: dict[tuple[str, uuid.UUID], float] = {}

    # --- the box's engine ---------------------------------------------------------------------

    def reconfigure(self, engine_factory: EngineFactory, config: EngineConfig) -> None:
        """The box's engine or options changed: sessions built from now on use the new ones,
        those built before are replaced when next used while idle (``_outdated``)."""
        self.engine_factory = engine_factory
        self.config = config
        self.generation += 1

    def _engine_name(self) -> str | None:
        return self.config[0] if self.config is not None else None

    def _outdated(self, kind: str, thread_id: uuid.UUID) -> bool:
        return self._built.get((kind, thread_id), (self.generation, None))[0] != self.generation

    async def _replaced(
        self, kind: str, thread_id: uuid.UUID, session: ChatSession | ChatThreadSession
    ) -> None:
        """Close an outdated idle session (its caller builds a new one); a thread whose
        engine changed forgets its engine conversation id."""
        _, engine = self._built.pop((kind, thread_id), (0, None))
        await session.stop()
        if engine != self._engine_name():
            await database_sync_to_async(forget_engine_sessions)(self.box_id, [thread_id])

    # --- interactive ------------------------------------------------------------------------

    async def chat_session(self, thread_id: uuid.UUID, *, emit: Emit, author: str = "user") -> ChatSession:
        # One creator at a time: two first sends of a thread must not build two sessions, and a
        # send must not find a session being replaced.
        async with self._creating:
            session = self.chat_sessions.get(thread_id)
            if session is not None and self._outdated("chat", thread_id) and session.is_idle():
                del self.chat_sessions[thread_id]
                await self._replaced("chat", thread_id, session)
                session = None
            if session is None:
                await self._make_room()
                session = await self._new_chat_session(thread_id, emit=emit, author=author)
            self.chat_sessions.move_to_end(thread_id)
            self._used["chat", thread_id] = time.monotonic()
            return session

    async def _new_chat_session(self, thread_id: uuid.UUID, *, emit: Emit, author: str) -> ChatSession:
        # The session writes under the claim this process holds on the thread, as it is now.
        engine_session_id, fence = await transcript.load_runner_state(thread_id, await mailbox.channel())
        session = ChatSession(
            thread_id=thread_id,
            engine=self.engine_factory(),
            emit=emit,
            engine_session_id=engine_session_id,
            author=author,
            fence=fence,
            on_fenced=lambda: self._fenced(thread_id, session),
        )
        self.chat_sessions[thread_id] = session
        self._built["chat", thread_id] = (self.generation, self._engine_name())
        # A turn the thread's previous runner left open ends with a visible error; sends
        # accepted but never transcribed (a crash, a restart, a dead owner) go first.
        await session.close_orphaned_turns()
        session.recover(await transcript.pending_turns(thread_id))
        return session

    def _fenced(self, thread_id: uuid.UUID, session: ChatSession) -> None:
        """The session lost its thread to another process: it leaves the pool (the next
        send for the thread asks who owns it now)."""
        known_owners.forget(("thread", thread_id))
        if self.chat_sessions.get(thread_id) is session:
            del self.chat_sessions[thread_id]
            self._forget("chat", thread_id)

    async def _make_room(self) -> None:
        """Room for one more session: when the box is at ``ENGINE_SESSIONS_PER_BOX``, its least
        recently used idle session is closed; when the process is at
        ``ENGINE_SESSIONS_PER_PROCESS``, the least recently used idle one of any box. Raises
        ``BoxAtCapacity`` when there is none to close."""
        if len(self.chat_sessions) >= settings.ENGINE_SESSIONS_PER_BOX:
            idle = next((t for t, s in self.chat_sessions.items() if s.is_idle()), None)
            if idle is None:
                raise BoxAtCapacity(str(self.box_id))
            await self.evict(idle)
        if (
            self.process is not None
            and self.process.chat_session_count() >= settings.ENGINE_SESSIONS_PER_PROCESS
        ):
            victim = self.process.least_recently_used_idle(besides=self)
            if victim is None:
                raise BoxAtCapacity(str(self.box_id))
            pool, thread_id = victim
            await pool.evict(thread_id)

    def creating(self) -> bool:
        return self._creating.locked()

    def idle_since(self) -> list[tuple[float, uuid.UUID]]:
        """``(last used, thread)`` of this box's idle chat sessions."""
        return [(self._used.get(("chat", t), 0.0), t) for t, s in self.chat_sessions.items() if s.is_idle()]

    async def rewind(
        self, thread_id: uuid.UUID, cut: Callable[[], Awaitable[tuple[str | None, int]]]
    ) -> bool:
        """An edit of the thread's conversation, once its session is idle: close the run,
        ``cut`` the transcript (answering the engine's conversation id and the turns it keeps)
        and rewind the engine to match (``engines.base.Rewinds``), with no session of the
        thread built meanwhile: the next one resumes the cut conversation. False, and nothing
        changed, while a turn runs, waits or is being handed over."""
        async with self._creating:
            session = self.chat_sessions.get(thread_id)
            if session is not None:
                if not session.is_idle():
                    return False
                await self.evict(thread_id)
            conversation_id, turns_kept = await cut()
            if conversation_id:
                await cast(Rewinds, self.engine_factory()).rewind(conversation_id, turns_kept)
        return True

    async def evict(self, thread_id: uuid.UUID) -> None:
        session = self.chat_sessions.pop(thread_id, None)
        self._forget("chat", thread_id)
        if session is not None:
            await session.stop()

    # --- integrations ---------------------------------------------------------------------------

    async def activate(self, thread_id: uuid.UUID, *, author: str = "user") -> ChatThreadSession:
        """Make ``thread_id`` the box's active thread session, parking the previous one."""
        async with self._activation:
            if self.active_thread is not None and self.active_thread != thread_id:
                await self.thread_sessions[self.active_thread].park()
            session = self.thread_sessions.get(thread_id)
            if session is not None and self._outdated("thread", thread_id) and not session.is_busy():
                del self.thread_sessions[thread_id]
                await self._replaced("thread", thread_id, session)
                session = None
            if session is None:
                engine_session_id, fence = await transcript.load_integration_state(
                    thread_id, self.box_id, await mailbox.channel()
                )
                session = ChatThreadSession(
                    thread_id=thread_id,
                    engine=self.engine_factory(),
                    engine_session_id=engine_session_id,
                    author=author,
                )
                session.fence = fence  # its writes are made under this process's claim on the box
                self.thread_sessions[thread_id] = session
                self._built["thread", thread_id] = (self.generation, self._engine_name())
            self.active_thread = thread_id
            self._used["thread", thread_id] = time.monotonic()
            return session

    async def send_to_thread(
        self, thread_id: uuid.UUID, turn: UserTurn, *, author: str = "user"
    ) -> TurnResponse:
        session = await self.activate(thread_id, author=author)
        return await session.send(turn)

    # --- idle runs ------------------------------------------------------------------------------

    async def close_idle(self, idle_for: float) -> int:
        """Close the sessions (and so their engine runs) nobody has used for ``idle_for``
        seconds: nothing in flight, queued or being handed over. Their threads keep their
        engine conversation ids, so the next message resumes the conversation in a new run.
        Returns how many were closed."""
        now = time.monotonic()
        closed = 0
        async with self._creating:
            for thread_id, session in list(self.chat_sessions.items()):
                if not session.is_idle():
                    self._used["chat", thread_id] = now  # busy now: idle from its last turn on
                elif now - self._used.setdefault(("chat", thread_id), now) >= idle_for:
                    del self.chat_sessions[thread_id]
                    self._forget("chat", thread_id)
                    await session.stop()
                    closed += 1
        async with self._activation:
            for thread_id, thread_session in list(self.thread_sessions.items()):
                if thread_session.is_busy():
                    self._used["thread", thread_id] = now
                elif now - self._used.setdefault(("thread", thread_id), now) >= idle_for:
                    del self.thread_sessions[thread_id]
                    self._forget("thread", thread_id)
                    if self.active_thread == thread_id:
                        self.active_thread = None
                    await thread_session.stop()
                    closed += 1
        metrics.engine_idle_closes.inc(closed)
        return closed

    def _forget(self, kind: str, thread_id: uuid.UUID) -> None:
        self._built.pop((kind, thread_id), None)
        self._used.pop((kind, thread_id), None)

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


class BoxPools:
    """This process's pools, one per box. Guarded by a lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pools: dict[uuid.UUID, BoxPool] = {}

    def for_box(self, box_id: uuid.UUID, engine: str, options: dict[str, Any]) -> BoxPool:
        """The box's pool, built or reconfigured for ``engine`` and ``options`` (the box as
        the caller just read it)."""
        config: EngineConfig = (engine, copy.deepcopy(options))
        with self._lock:
            pool = self._pools.get(box_id)
            if pool is None:
                pool = self._pools[box_id] = BoxPool(box_id, _factory(config), config=config, process=self)
            elif pool.config != config:
                pool.reconfigure(_factory(config), config)
            return pool

    def all(self) -> list[BoxPool]:
        with self._lock:
            return list(self._pools.values())

    def chat_session_count(self) -> int:
        return sum(len(pool.chat_sessions) for pool in self.all())

    def least_recently_used_idle(self, *, besides: BoxPool) -> tuple[BoxPool, uuid.UUID] | None:
        """The idle chat session used longest ago, of ``besides`` (whose creation lock the
        caller holds) or of a box whose pool is not creating a session right now (closing one
        it is handing out would leave two sessions for one thread)."""
        idle = [
            (used, thread_id, pool)
            for pool in self.all()
            if pool is besides or not pool.creating()
            for used, thread_id in pool.idle_since()
        ]
        if not idle:
            return None
        _used, thread_id, pool = min(idle, key=lambda entry: entry[0])
        return pool, thread_id

    def find_chat_session(self, thread_id: uuid.UUID) -> ChatSession | None:
        for pool in self.all():
            session = pool.chat_sessions.get(thread_id)
            if session is not None:
                return session
        return None

    def clear(self) -> None:
        with self._lock:
            self._pools.clear()


def _factory(config: EngineConfig) -> EngineFactory:
    engine, options = config
    return lambda: get_engine(engine, options, transcript=transcript.engine_conversation)


pools = BoxPools()
