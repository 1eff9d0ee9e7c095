"""``ChatThreadSession``: one integration thread; delivers complete responses only.

No queue: ``send()`` while busy raises ``SessionBusy`` and otherwise resolves when the turn's
result lands, with the complete assistant text. The pool keeps one of these active per box
and parks the others (run closed, engine session id kept for resume). There is no stopping
phase here: stop and park close straight from ready/streaming to idle.
"""

import asyncio
import logging
import uuid
from dataclasses import dataclass, field
from typing import assert_never

from sessions_app.runtime import transcript
from sessions_app.runtime.engines.base import Engine, EngineError, Run, UserTurn
from sessions_app.runtime.messages import (
    AssistantText,
    ChatMessage,
    StreamDelta,
    SystemInit,
    TaskEvent,
    ToolCall,
    ToolOutput,
    TurnResult,
    UnknownMessage,
)
from sessions_app.runtime.phases import Phase, is_busy, is_running, transition
from sessions_app.runtime.pump import pump_run

logger = logging.getLogger(__name__)

PARK_WAIT = 60.0


class SessionBusy(Exception):
    """A turn is in flight on this thread; integrations retry or wait for the response."""


@dataclass
class TurnResponse:
    """What an integration gets back: the complete assistant text of the turn."""

    text: str
    is_error: bool = False
    outcome: str = "success"
    step_ids: list[str] = field(default_factory=list)


class ChatThreadSession:
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
        self.run: Run | None = None
        self.runs_started = 0
        self.runs_open = 0
        self._turn: asyncio.Future[TurnResponse] | None = None
        self._pump_task: asyncio.Task[None] | None = None
        self._texts: list[str] = []
        self._step_ids: list[str] = []
        self._idle = asyncio.Event()
        self._idle.set()

    def _move(self, target: Phase) -> None:
        previous = self.phase
        self.phase = transition(previous, target)
        if target is Phase.IDLE:
            self._idle.set()
        elif previous is Phase.IDLE:
            self._idle.clear()

    def is_running(self) -> bool:
        return is_running(self.phase)

    def is_busy(self) -> bool:
        return is_busy(self.phase)

    async def send(self, turn: UserTurn) -> TurnResponse:
        if self.is_busy():
            raise SessionBusy(str(self.thread_id))
        self._texts, self._step_ids = [], []
        self._turn = asyncio.get_running_loop().create_future()  # park() waits from the start
        if self.phase is Phase.IDLE:
            self._move(Phase.STARTING)
            try:
                run = await self.engine.start(resume=self.engine_session_id)
            except EngineError:
                self._move(Phase.IDLE)
                self._finish(TurnResponse("The engine could not start.", True, "error"))
                raise
            self.run = run
            self.runs_started += 1
            self.runs_open += 1
            self._move(Phase.READY)
            self._pump_task = asyncio.create_task(
                pump_run(run, self._on_message, lambda err: self._on_close(run, err))
            )
        assert self.run is not None
        run = self.run  # the close handler may clear self.run while the user step is written
        self._move(Phase.STREAMING)
        try:
            await transcript.write_user_step(self.thread_id, turn, self.author)
        except Exception:
            self._move(Phase.READY)  # the engine never saw the turn
            raise
        await run.send(turn)
        return await self._turn

    async def _on_message(self, message: ChatMessage) -> None:
        match message:
            case SystemInit(engine_session_id=session_id):
                if session_id and session_id != self.engine_session_id:
                    self.engine_session_id = session_id
                    await transcript.save_engine_session_id(self.thread_id, session_id)
            case StreamDelta():
                pass  # deliberate: integrations get complete responses, never partial text
            case TaskEvent():
                logger.debug(
                    "thread %s: task event skipped (integrations get responses only)", self.thread_id
                )
            case AssistantText(message_id=message_id, text=text):
                step = await transcript.write_assistant_text(self.thread_id, message_id, text)
                self._texts.append(text)
                self._step_ids.append(step["id"])
            case ToolCall(tool_use_id=tool_use_id, name=name, input=tool_input):
                await transcript.write_tool_call(self.thread_id, tool_use_id, name, tool_input)
            case ToolOutput(tool_use_id=tool_use_id, output=output, is_error=is_error):
                await transcript.finish_tool_step(self.thread_id, tool_use_id, output, is_error)
            case TurnResult(outcome=outcome, is_error=is_error, text=text):
                if self.phase is Phase.STREAMING:
                    self._move(Phase.READY)
                body = "\n\n".join(self._texts) if self._texts else (text or "")
                self._finish(TurnResponse(body, is_error, outcome, list(self._step_ids)))
            case UnknownMessage(raw=raw):
                logger.warning("thread %s: unhandled engine message %r", self.thread_id, raw.get("type"))
            case _:
                assert_never(message)

    def _finish(self, response: TurnResponse) -> None:
        if self._turn is not None and not self._turn.done():
            self._turn.set_result(response)

    async def _on_close(self, run: Run, error: BaseException | None) -> None:
        if run is not self.run:
            return
        self.run = None
        self.runs_open -= 1
        if self.phase is not Phase.IDLE:
            self._move(Phase.IDLE)
        self._finish(
            TurnResponse("The engine stopped before answering.", True, "closed", list(self._step_ids))
        )

    async def wait_idle_turn(self, timeout: float = PARK_WAIT) -> None:
        """Wait for the in-flight turn (if any) to finish."""
        if self._turn is not None and not self._turn.done():
            await asyncio.wait({self._turn}, timeout=timeout)

    async def park(self) -> None:
        """Let the in-flight turn finish, then close the run; the engine session id stays."""
        await self.wait_idle_turn()
        await self._close()

    async def stop(self) -> None:
        if self.run is not None and self.phase is Phase.STREAMING:
            await self.run.interrupt()
        await self._close()

    async def _close(self) -> None:
        if self.run is not None and self.phase in (Phase.READY, Phase.STREAMING):
            await self.run.close()
            await asyncio.wait_for(self._idle.wait(), 30)
