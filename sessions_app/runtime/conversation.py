"""What both kinds of conversation share: the phase, opening a run, the engine session id.

``ChatSession`` (interactive, streaming, queued) and ``ChatThreadSession`` (integrations,
complete responses only) differ in what they do with the engine's messages; opening a run,
moving through the phase table and remembering the engine's session id are the same for both
and live here. Every phase write goes through ``_move`` (and so through ``transition``, which
raises ``InvariantError`` on an illegal move); ``on_move`` lets an observer (a model-based
test, a metric) see each move as it happens.
"""

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable

from sessions_app import metrics
from sessions_app.runtime import transcript
from sessions_app.runtime.engines.base import Engine, Run
from sessions_app.runtime.messages import ChatMessage, UnknownMessage
from sessions_app.runtime.phases import Phase, is_running, transition
from sessions_app.runtime.pump import pump_run
from threads_app.fencing import Fence

logger = logging.getLogger(__name__)

MoveObserver = Callable[[Phase, Phase], None]


class Conversation:
    """One thread's conversation with its engine (see the subclasses)."""

    def __init__(
        self,
        *,
        thread_id: uuid.UUID,
        engine: Engine,
        engine_session_id: str | None = None,
        author: str = "user",
    ) -> None:
        self.thread_id = thread_id
        self.engine = engine
        self.engine_session_id = engine_session_id
        self.author = author
        self.phase = Phase.IDLE
        self.phase_log: list[tuple[Phase, Phase]] = []
        self.on_move: MoveObserver | None = None
        self.run: Run | None = None
        self.runs_started = 0
        self.runs_open = 0
        self._pump_task: asyncio.Task[None] | None = None
        self._idle = asyncio.Event()
        self._idle.set()
        # The claim the conversation's writes are made under (``threads_app.fencing``).
        self.fence: Fence | None = None

    # --- phase --------------------------------------------------------------------------

    def _move(self, target: Phase) -> None:
        previous = self.phase
        self.phase = transition(previous, target)
        self.phase_log.append((previous, target))
        if target is Phase.IDLE:
            self._idle.set()
        elif previous is Phase.IDLE:
            self._idle.clear()
        if self.on_move is not None:
            self.on_move(previous, target)

    def is_running(self) -> bool:
        return is_running(self.phase)

    def pump_running(self) -> bool:
        """The run's pump has not finished (its close handler may still be coming)."""
        return self._pump_task is not None and not self._pump_task.done()

    async def wait_idle(self, timeout: float = 30.0) -> None:
        await asyncio.wait_for(self._idle.wait(), timeout)

    # --- runs ---------------------------------------------------------------------------

    async def _open_run(self) -> Run:
        """Start a run (resuming the engine's conversation) and its pump; the phase goes
        ready. Raises the engine's ``EngineError``; the caller moves back to idle."""
        run = await self.engine.start(resume=self.engine_session_id)
        self.run = run
        self.runs_started += 1
        self.runs_open += 1
        metrics.engine_runs.inc()
        self._move(Phase.READY)
        self._pump_task = asyncio.create_task(
            pump_run(run, self.on_message, lambda err: self.on_close(run, err))
        )
        return run

    async def _wait_pump(self, timeout: float = 30.0) -> None:
        task = self._pump_task
        if task is not None and not task.done():
            await asyncio.wait({task}, timeout=timeout)

    async def _remember_engine_session(self, engine_session_id: str) -> None:
        """The engine reported its conversation id: kept on the thread so a later run resumes it."""
        if engine_session_id and engine_session_id != self.engine_session_id:
            self.engine_session_id = engine_session_id
            await transcript.save_engine_session_id(self.thread_id, engine_session_id, self.fence)

    def _unknown(self, message: UnknownMessage) -> None:
        logger.warning("thread %s: unhandled engine message %r", self.thread_id, message.raw.get("type"))

    # --- the pump's callbacks (the subclasses' message switch and close handler) ------------

    on_message: Callable[[ChatMessage], Awaitable[None]]

    async def on_close(self, run: Run, error: BaseException | None) -> None:
        raise NotImplementedError
