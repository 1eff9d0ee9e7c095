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
from typing import TYPE_CHECKING, assert_never

from chatproject import tracing
from sessions_app import metrics
from sessions_app.runtime import transcript
from sessions_app.runtime.conversation import Conversation
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
from sessions_app.runtime.phases import Phase, is_busy
from threads_app.fencing import Fenced

if TYPE_CHECKING:
    from opentelemetry.trace import Span

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
    # The turn's span (W3C headers, ``tracing.carrier_of``; traces on only): the parent of
    # the response's webhook attempts, also for a turn a recovery ran outside any trace.
    trace: dict[str, str] | None = field(default=None, compare=False, repr=False)


# The outcome of a turn whose box another process took over (``threads_app.fencing``): its
# writes were refused; the box's new owner answers the send.
LOST = "lost"


class ChatThreadSession(Conversation):
    # The running turn's span (traces on only), current while its messages are handled.
    _turn_span: "Span | None" = None

    def __init__(
        self,
        *,
        thread_id: uuid.UUID,
        engine: Engine,
        engine_session_id: str | None = None,
        author: str = "user",
    ) -> None:
        super().__init__(
            thread_id=thread_id, engine=engine, engine_session_id=engine_session_id, author=author
        )
        self._turn: asyncio.Future[TurnResponse] | None = None
        self._texts: list[str] = []
        self._step_ids: list[str] = []

    def is_busy(self) -> bool:
        return is_busy(self.phase)

    async def send(self, turn: UserTurn) -> TurnResponse:
        """The turn's complete response, in a span of its own when traces are on: a child of the
        span its send was accepted in (``turn.trace``), ended with the response's outcome."""
        if self.is_busy():
            raise SessionBusy(str(self.thread_id))
        self._texts, self._step_ids = [], []
        response = self._turn = asyncio.get_running_loop().create_future()  # park() waits from the start
        span = self._turn_span = tracing.begin("turn", turn.trace)
        if span is None:
            return await self._send(turn, response)
        span.set_attribute("tether.kind", "integration")
        span.set_attribute("tether.thread", str(self.thread_id))
        span.set_attribute("tether.sends", ",".join(map(str, turn.accepted_ids)))
        try:
            with tracing.active(span):
                return await self._send(turn, response)
        finally:
            if self._turn_span is span:  # no response: the send raised
                self._turn_span = None
                tracing.end(span, "error")

    async def _send(self, turn: UserTurn, response: "asyncio.Future[TurnResponse]") -> TurnResponse:
        if self.phase is Phase.IDLE:
            self._move(Phase.STARTING)
            try:
                await self._open_run()
            except EngineError:
                self._move(Phase.IDLE)
                self._finish(TurnResponse("The engine could not start.", True, "error"))
                raise
        run = self.run  # the close handler may clear self.run while the user step is written
        assert run is not None
        self._move(Phase.STREAMING)
        try:
            await transcript.write_user_step(self.thread_id, turn, self.author, self.fence)
        except Fenced as exc:
            self._move(Phase.READY)
            self._lose(exc)
            return await response
        except Exception:
            self._move(Phase.READY)  # the engine never saw the turn
            raise
        await run.send(turn)
        return await response

    def _lose(self, exc: Fenced) -> None:
        """The box was taken over: this turn's work is dropped, and said once."""
        logger.warning("box of thread %s was taken over while this process ran it (%s)", self.thread_id, exc)
        self._finish(TurnResponse("", True, LOST, list(self._step_ids)))

    async def on_message(self, message: ChatMessage) -> None:
        """The engine's message; a refused write ends the turn as lost (``LOST``)."""
        try:
            with tracing.active(self._turn_span):
                await self._on_message(message)
        except Fenced as exc:
            self._lose(exc)

    async def _on_message(self, message: ChatMessage) -> None:
        """The message switch: exhaustive; deltas and task events are skipped on purpose."""
        match message:
            case SystemInit(engine_session_id=session_id):
                await self._remember_engine_session(session_id)
            case StreamDelta():
                pass  # deliberate: integrations get complete responses, never partial text
            case TaskEvent():
                logger.debug(
                    "thread %s: task event skipped (integrations get responses only)", self.thread_id
                )
            case AssistantText(message_id=message_id, text=text):
                with tracing.part("reply"):
                    step = await transcript.write_assistant_text(self.thread_id, message_id, text, self.fence)
                self._texts.append(text)
                self._step_ids.append(step["id"])
            case ToolCall(tool_use_id=tool_use_id, name=name, input=tool_input):
                await transcript.write_tool_call(self.thread_id, tool_use_id, name, tool_input, self.fence)
            case ToolOutput(tool_use_id=tool_use_id, output=output, is_error=is_error):
                await transcript.finish_tool_step(self.thread_id, tool_use_id, output, is_error, self.fence)
            case TurnResult(outcome=outcome, is_error=is_error, text=text):
                if self.phase is Phase.STREAMING:
                    self._move(Phase.READY)
                body = "\n\n".join(self._texts) if self._texts else (text or "")
                self._finish(TurnResponse(body, is_error, outcome, list(self._step_ids)))
            case UnknownMessage():
                self._unknown(message)
            case _:
                assert_never(message)

    def _finish(self, response: TurnResponse) -> None:
        if self._turn is not None and not self._turn.done():
            span, self._turn_span = self._turn_span, None
            response.trace = tracing.carrier_of(span)
            self._turn.set_result(response)
            tracing.end(span, response.outcome)

    async def on_close(self, run: Run, error: BaseException | None) -> None:
        if run is not self.run:
            return
        self.run = None
        self.runs_open -= 1
        metrics.engine_runs.dec()
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
            await self.wait_idle()
