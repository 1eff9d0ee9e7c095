"""``ChatSession``: the interactive conversation of one thread, streaming to the web UI.

The contract (docs/design.md, "Chat runtime"):

- ``send()`` while busy (starting or streaming) returns False and the caller ``enqueue()``s;
  messages queued while the run is starting ride its first turn;
- when a turn's result lands the phase flips to ready *before* the result's side effects, then
  the queue drains into the next turn, all queued messages merged into one;
- a run that dies with a non-empty queue starts a fresh run and drains into it;
- ``stop()`` moves to stopping and clears the queue, so the close handler does not drain;
  ``restart()`` only closes the run, so the close handler drains into a fresh one;
  ``reset_session()`` is stop plus forgetting the engine's session id;
- every write is made under the thread's claim (``fence``, ``threads_app.fencing``): a
  session whose thread another process took over (this one was judged dead while it stalled)
  has its first write refused, and then drops its turn and queue, shows nothing more and
  leaves the pool (``on_fenced``); the new owner answers what was accepted;
- in the close window (the run has closed, the phase is not idle yet) ``send()`` returns False
  rather than racing a second run;
- a complete reply is held briefly (``HeldReply``): when the turn's result follows it (the
  common case: one read of the engine's output holds both) the reply's step and the turn's
  outcome are one database write (``transcript.write_reply_answering``), so a send never has
  an outcome without its reply; anything else the engine says next, the run closing, or
  ``REPLY_HOLD`` passing writes and shows the held reply first, as its own write.
"""

import asyncio
import dataclasses
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, assert_never

from chatproject import log_context, tracing
from sessions_app import fence_checks, metrics
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
from sessions_app.runtime.queued_turns import QueuedTurns
from threads_app.fencing import Fence, Fenced
from threads_app.step_budgets import StreamAllowance
from threads_app.wire import live_user_step

if TYPE_CHECKING:
    from opentelemetry.trace import Span

logger = logging.getLogger(__name__)

Emit = Callable[[str, Any], Awaitable[None]]
ENGINE_DIED_TEXT = "The engine stopped unexpectedly; your next message starts it again."
SERVER_STOPPED_TEXT = "The server stopped while answering this message; send it again."
# How long a complete reply waits for its turn's result before it is written on its own (the
# engine said nothing more meanwhile): the reply is shown at most this much later.
REPLY_HOLD = 0.05


@dataclasses.dataclass(frozen=True)
class HeldReply:
    """A complete reply not written yet: the engine's message id, its text, and the event that
    shows it (``update_message`` when it was streamed)."""

    message_id: str
    text: str
    event: str


class ChatSession(Conversation):
    # Set once the thread turned out to be another process's (``_lose``).
    fenced = False
    # The trace span of the turn in flight (chatproject.tracing; None with traces off).
    _turn_span: "Span | None" = None
    # The turn's complete reply, not written yet, and whether a write of one is under way.
    _reply: HeldReply | None = None
    _reply_writing = False

    def __init__(
        self,
        *,
        thread_id: uuid.UUID,
        engine: Engine,
        emit: Emit,
        engine_session_id: str | None = None,
        author: str = "user",
        fence: Fence | None = None,
        on_fenced: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(
            thread_id=thread_id, engine=engine, engine_session_id=engine_session_id, author=author
        )
        self._emit = emit
        # The claim this session writes under, and what to call when it turns out stale.
        self.fence = fence
        self._on_fenced = on_fenced
        self.fenced = False
        fence_checks.note_taken(fence)
        self.queue = QueuedTurns()
        self.dropped: list[uuid.UUID] = []  # accepted ids stop() cleared from the queue
        self._was_busy = False
        self._stop_requested = False
        self._closing = False  # stop() or restart() is closing the run: do not start turns on it
        self._handing_over = 0
        self._taken: set[uuid.UUID] = set()  # accepted ids this session has queued or sent
        self._background: set[asyncio.Task[Any]] = set()
        self._streamed: dict[str, dict[str, Any]] = {}  # engine message id -> streamed step dict
        self._partial: dict[str, list[str]] = {}  # engine message id -> the tokens streamed so far
        # engine message id -> what its stream may still show (``STEP_MAX_BYTES``)
        self._allowances: dict[str, StreamAllowance] = {}
        self._turn_ids: list[uuid.UUID] = []  # accepted ids of the turn in flight
        self._turn_clock: metrics.EngineTurnClock | None = None  # of the turn in flight
        self._reply = None
        self._reply_lock = asyncio.Lock()  # orders a held reply's write before what follows it
        self._reply_timer: asyncio.TimerHandle | None = None
        # A graceful shutdown: no new turn starts here; what is queued stays pending in the
        # database for the box's next owner.
        self.draining = False

    async def emit(self, event: str, data: Any) -> None:
        """Show ``event`` to the thread's watchers, unless the thread was taken over (checked
        with the database only when this process's lease may have lapsed: after a stall)."""
        if self.fenced:
            return
        if not await fence_checks.may_show(self.fence):
            assert self.fence is not None
            await self._lose(Fenced(self.fence, f"event {event}"))
            return
        await self._emit(event, data)

    async def _lose(self, exc: Fenced) -> None:
        """The thread was taken over (``exc``): drop the turn, the queue and the run; the new
        owner answers every send accepted for the thread. Logged once."""
        if self.fenced:
            return
        self.fenced = True
        logger.warning(
            "thread %s was taken over while this process ran it (%s); dropping its turn, %d queued "
            "turn(s) and its run",
            self.thread_id,
            exc,
            len(self.queue),
        )
        self.queue.clear()
        self._turn_ids = []
        self._reply = None
        span, self._turn_span = self._turn_span, None
        tracing.end(span, "lost")
        self._streamed.clear()
        self._partial.clear()
        if self._on_fenced is not None:
            self._on_fenced()
        run = self.run
        if run is not None:
            self._closing = True
            task = asyncio.create_task(run.close())  # the close handler writes nothing now
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    # --- phase --------------------------------------------------------------------------

    def is_busy(self) -> bool:
        return is_busy(self.phase, was_busy=self._was_busy)

    def is_idle(self) -> bool:
        """No turn in flight, queued or being handed over: closing the session loses nothing."""
        return self.phase in (Phase.IDLE, Phase.READY) and not self.queue and self._handing_over == 0

    def in_close_window(self) -> bool:
        return self.run is not None and self.run.closed.is_set() and self.phase is not Phase.IDLE

    # --- sending --------------------------------------------------------------------------

    async def send(self, turn: UserTurn) -> bool:
        """Start the turn now, or return False (busy, stopping, or closing): then enqueue."""
        if self.fenced:
            return True  # the thread's new owner answers it (it is pending in the database)
        if self.refuses_sends():
            return False
        if self.phase is Phase.IDLE:
            if not await self._start_run():
                if self._stop_requested:  # stop() came while the engine started: drop it too
                    self._drop([turn])
                else:
                    self.queue.insert(0, turn)
                return True
            if self.queue:  # sends that arrived while starting ride the first turn
                turn = UserTurn.merge([turn, *self.queue])
                self.queue.clear()
        await self._begin_turn(turn)
        return True

    def enqueue(self, turn: UserTurn) -> None:
        self.queue.append(turn)

    async def submit(self, turn: UserTurn) -> bool:
        """Send or enqueue; True when the turn had to wait in the queue."""
        if await self.send(turn):
            return False
        self.enqueue(turn)
        return True

    def submit_soon(self, turn: UserTurn) -> bool:
        """Hand a turn over without waiting for the engine (the caller answers the client
        first). Returns whether it will wait in the queue behind work in flight. Sends this
        session already holds (recovered ones, say) are not taken twice."""
        fresh = [i for i in turn.accepted_ids if i not in self._taken]
        if turn.accepted_ids and not fresh:
            return any(i in t.accepted_ids for t in self.queue for i in turn.accepted_ids)
        self._taken.update(fresh)
        queued = self.refuses_sends() or self._handing_over > 0
        self._handing_over += 1
        task = asyncio.create_task(self._hand_over(turn))
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return queued

    def recover(self, turns: list[UserTurn]) -> None:
        """Take over sends that were accepted but never transcribed, as one merged turn."""
        fresh = [t for t in turns if not set(t.accepted_ids) & self._taken]
        if fresh:
            self.submit_soon(UserTurn.merge(fresh))

    async def _hand_over(self, turn: UserTurn) -> None:
        try:
            await self.submit(turn)
        finally:
            self._handing_over -= 1

    async def _start_run(self) -> bool:
        self._move(Phase.STARTING)
        self._stop_requested = False
        try:
            await self._open_run()
        except EngineError as exc:
            logger.error("engine failed to start for thread %s: %s", self.thread_id, exc)
            self._move(Phase.IDLE)
            await self.emit("new_message", await self._error_step(f"The engine could not start: {exc}"))
            return False
        if self._stop_requested:
            await self.stop()
            return False
        return True

    async def _begin_turn(self, turn: UserTurn) -> None:
        """Start ``turn`` on the run, in its own span when traces are on: a child of the span
        its send was accepted (or forwarded) in, current for the turn's work until it settles."""
        span = self._turn_span = tracing.begin("turn", turn.trace)
        if span is None:
            await self._begin_turn_now(turn)
            return
        span.set_attribute("tether.kind", metrics.ENGINE)
        span.set_attribute("tether.thread", str(self.thread_id))
        span.set_attribute("tether.sends", ",".join(map(str, turn.accepted_ids)))
        with tracing.active(span):
            try:
                await self._begin_turn_now(turn)
            except BaseException:
                self._turn_span = None
                tracing.end(span, "not begun")  # queued again: its next try has a span of its own
                raise
        if self.phase is not Phase.STREAMING and self._turn_span is span:
            self._turn_span = None
            tracing.end(span, "not begun")

    async def _begin_turn_now(self, turn: UserTurn) -> None:
        run = self.run
        assert run is not None
        self._move(Phase.STREAMING)
        try:
            step = await transcript.write_user_step(self.thread_id, turn, self.author, self.fence)
        except Fenced as exc:
            await self._lose(exc)
            return
        except Exception:
            # Not transcribed, not sent: the turn stays first in line and the run stays usable.
            self._move(Phase.READY)
            self.queue.insert(0, turn)
            raise
        self._turn_ids = list(turn.accepted_ids)
        if self._turn_clock is not None:  # a turn that never settled (cannot happen): counted as cut
            self._turn_clock.end("error")
        self._turn_clock = metrics.EngineTurnClock(turn.accepted_at)
        sends = ",".join(map(str, turn.accepted_ids))
        log_context.bind(thread=self.thread_id, turn=uuid.uuid4().hex[:12], send=sends)
        logger.info("turn of send(s) %s began", sends)
        await self.emit("task_start", None)
        await self.emit("new_message", live_user_step(step))  # under the id its client chose
        try:
            await run.send(turn)
        except EngineError:
            # The run died before taking the turn. It is transcribed already, so it ends with the
            # run like a turn cut mid-stream (the close handler says so); queued again, it could
            # be merged behind another turn and transcribed twice, or dropped by a stop as well.
            logger.warning("run of thread %s died as a turn was sent", self.thread_id)

    # --- the pump's callbacks ------------------------------------------------------------------

    async def on_message(self, message: ChatMessage) -> None:
        """The engine's message, unless the thread was taken over (then dropped)."""
        if self.fenced:
            return
        try:
            with tracing.active(self._turn_span):
                await self._on_message(message)
        except Fenced as exc:
            await self._lose(exc)

    async def _on_message(self, message: ChatMessage) -> None:
        """The message switch: exhaustive (a new message type fails ``assert_never``). A held
        reply is written before whatever follows it, except the turn's result (written with it)."""
        if not isinstance(message, TurnResult) and (self._reply is not None or self._reply_writing):
            await self._flush_reply()
        match message:
            case SystemInit(engine_session_id=session_id):
                await self._remember_engine_session(session_id)
            case StreamDelta(message_id=message_id, text=text):
                text = self._allowances.setdefault(message_id, StreamAllowance()).fit(text)
                if not text:
                    return  # the reply is full: its step keeps no more (nor is more shown)
                self._partial.setdefault(message_id, []).append(text)
                if self._turn_clock is not None:
                    self._turn_clock.output()
                start = self._streamed.get(message_id)
                if start is None:  # the step id is derived once per message, not per token
                    start = {
                        "id": str(transcript.engine_step_id(self.thread_id, message_id)),
                        "threadId": str(self.thread_id),
                        "type": "assistant_message",
                        "name": "assistant",
                        "output": "",
                        "streaming": True,
                        "isError": False,
                        "metadata": {},
                    }
                    self._streamed[message_id] = start
                    await self.emit("stream_start", start)
                await self.emit(
                    "stream_token", {"id": start["id"], "token": text, "isSequence": False, "isInput": False}
                )
            case AssistantText(message_id=message_id, text=text):
                if self._turn_clock is not None:
                    self._turn_clock.output()
                self._partial.pop(message_id, None)
                self._allowances.pop(message_id, None)
                streamed = self._streamed.pop(message_id, None) is not None
                self._hold_reply(HeldReply(message_id, text, "update_message" if streamed else "new_message"))
            case ToolCall(tool_use_id=tool_use_id, name=name, input=tool_input):
                step = await transcript.write_tool_call(
                    self.thread_id, tool_use_id, name, tool_input, self.fence
                )
                await self.emit("new_message", step)
            case ToolOutput(tool_use_id=tool_use_id, output=output, is_error=is_error):
                finished = await transcript.finish_tool_step(
                    self.thread_id, tool_use_id, output, is_error, self.fence
                )
                if finished is not None:
                    await self.emit("update_message", finished)
            case TaskEvent():
                logger.debug("task event for thread %s: %s", self.thread_id, message)
            case TurnResult():
                await self._on_result(message)
            case UnknownMessage():
                self._unknown(message)
            case _:
                assert_never(message)

    async def _on_result(self, result: TurnResult) -> None:
        stopping = self.phase is Phase.STOPPING
        if self.phase is Phase.STREAMING:
            self._move(Phase.READY)  # the busy flip comes before the result's side effects
        interrupted = stopping or result.outcome == "interrupted"
        reply = await self._take_reply()
        if reply is not None and (self._streamed or result.is_error):
            await self._write_reply(reply)  # other steps follow it: it is not the turn's last
            reply = None
        await self._keep_partial_replies(interrupted=interrupted)
        if result.is_error:
            await self.emit("new_message", await self._error_step(result.text or "The turn failed."))
        outcome = "error" if result.is_error else "interrupted" if interrupted else "replied"
        await self._settle_turn(outcome, reply)
        await self.emit("task_end", None)
        if self.queue and self.phase is Phase.READY and not self._closing and not self.draining:
            merged = UserTurn.merge(self.queue)
            self.queue.clear()
            await self._begin_turn(merged)

    async def on_close(self, run: Run, error: BaseException | None) -> None:
        if run is not self.run:
            return
        try:
            await self._on_close(run)
        except Fenced as exc:
            await self._lose(exc)

    async def _on_close(self, run: Run) -> None:
        was_stopping = self.phase is Phase.STOPPING
        was_streaming = self.phase is Phase.STREAMING
        self.run = None
        self.runs_open -= 1
        metrics.engine_runs.dec()
        self._closing = False
        self._was_busy = False
        self._move(Phase.IDLE)
        if self.fenced:
            return  # the thread is another process's: nothing here is written or shown
        await self._flush_reply()  # the run ended before the turn's result: the reply stays
        if was_stopping and not self.draining:
            # Sends refused while stopping were queued after stop() dropped the rest; they go
            # now, before the awaits below let another hand-over start a run with them.
            self._drop(self.queue)
            self.queue.clear()
        # A reply cut here (a stop, or the engine dying) keeps what was streamed of it.
        await self._keep_partial_replies(interrupted=was_stopping)
        if was_streaming:
            await self.emit("new_message", await self._error_step(ENGINE_DIED_TEXT))
            await self._settle_turn("error")
            await self.emit("task_end", None)
        elif self._turn_ids:  # stopped mid-turn: the result never came
            await self._settle_turn("interrupted")
        if self.draining:
            pass  # queued sends stay pending in the database for the box's next owner
        elif self.queue:  # sends that came while the run closed (a stop's refusals are gone)
            merged = UserTurn.merge(self.queue)
            self.queue.clear()
            await self.submit(merged)  # a send that came meanwhile may be starting a run: ride it

    async def _keep_partial_replies(self, *, interrupted: bool) -> None:
        """Transcribe replies that were streamed but never completed, with what the user saw
        of them, and show them as final (marked interrupted when a stop cut them)."""
        streamed, self._streamed = self._streamed, {}
        for message_id, start in streamed.items():
            text = "".join(self._partial.pop(message_id, []))
            step = await transcript.write_engine_step(
                self.thread_id,
                message_id,
                type="assistant_message",
                name=start.get("name") or "assistant",
                output=text,
                metadata={"interrupted": True} if interrupted else {},
                fence=self.fence,
            )
            await self.emit("update_message", step)
        self._partial.clear()
        self._allowances.clear()

    async def _settle_turn(self, outcome: str, reply: HeldReply | None = None) -> None:
        """Record how the turn in flight ended on the sends it carried, with ``reply`` (its
        last step, held) in the same write; the reply is shown once written."""
        ids, self._turn_ids = self._turn_ids, []
        clock, self._turn_clock = self._turn_clock, None
        span, self._turn_span = self._turn_span, None
        if clock is not None:
            clock.end(outcome)
            logger.info("turn of send(s) %s ended: %s", ",".join(map(str, ids)), outcome)
        with tracing.active(span):
            if ids and reply is not None:
                with tracing.part("reply"):
                    step = await transcript.write_reply_answering(
                        self.thread_id, reply.message_id, reply.text, ids, outcome, self.fence
                    )
                await self.emit(reply.event, step)
            elif reply is not None:
                await self._write_reply(reply)
            elif ids:
                await transcript.settle_turn(ids, outcome, fence=self.fence)
        tracing.end(span, outcome)

    # --- the held reply -------------------------------------------------------------------------

    def _hold_reply(self, reply: HeldReply) -> None:
        """Keep ``reply`` for the turn's result; written alone if ``REPLY_HOLD`` passes first."""
        self._reply = reply
        if self._reply_timer is not None:
            self._reply_timer.cancel()
        self._reply_timer = asyncio.get_running_loop().call_later(REPLY_HOLD, self._reply_held_too_long)

    def _reply_held_too_long(self) -> None:
        self._reply_timer = None
        if self._reply is not None and not self.fenced:
            task = asyncio.create_task(self._flush_reply_in_background())
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def _flush_reply_in_background(self) -> None:
        try:
            await self._flush_reply()
        except Fenced as exc:
            await self._lose(exc)
        except Exception:
            logger.exception("the reply of thread %s could not be transcribed", self.thread_id)

    async def _take_reply(self) -> HeldReply | None:
        """The held reply, now the caller's to write (after any write of it under way)."""
        async with self._reply_lock:
            reply, self._reply = self._reply, None
        if self._reply_timer is not None:
            self._reply_timer.cancel()
            self._reply_timer = None
        return reply

    async def _flush_reply(self) -> None:
        """Write and show the held reply now: something else follows it."""
        async with self._reply_lock:
            reply, self._reply = self._reply, None
            if reply is None:
                return
            self._reply_writing = True
            try:
                await self._write_reply(reply)
            finally:
                self._reply_writing = False

    async def _write_reply(self, reply: HeldReply) -> None:
        with tracing.part("reply"):
            step = await transcript.write_assistant_text(
                self.thread_id, reply.message_id, reply.text, self.fence
            )
        await self.emit(reply.event, step)

    async def close_orphaned_turns(self) -> None:
        """Turns this thread's previous runner (a process that died or was stopped) left
        without an outcome end here, with a visible error step; the user can send again."""
        try:
            for accepted_ids in await transcript.unsettled_turns(self.thread_id):
                step = await self._error_step(SERVER_STOPPED_TEXT)
                await transcript.settle_turn(accepted_ids, "error", fence=self.fence)
                await self.emit("new_message", step)
        except Fenced as exc:
            await self._lose(exc)

    async def _error_step(self, text: str) -> dict[str, Any]:
        return await transcript.write_engine_step(
            self.thread_id,
            f"error-{uuid.uuid4()}",
            type="assistant_message",
            name="Error",
            output=text,
            is_error=True,
            fence=self.fence,
        )

    # --- control --------------------------------------------------------------------------

    async def stop(self) -> None:
        """Interrupt and close the run, drop the queue; the close handler will not drain."""
        self._drop(self.queue)
        self.queue.clear()
        if self.phase is Phase.STARTING:
            self._stop_requested = True  # the start stops its run as it lands
        if self.phase in (Phase.STARTING, Phase.STOPPING):
            await self.wait_idle()  # stopped means stopped: no run opens or reports after this
            return
        if self.phase not in (Phase.READY, Phase.STREAMING):
            return
        self._was_busy = self.phase is Phase.STREAMING
        self._move(Phase.STOPPING)
        self._closing = True
        run = self.run
        assert run is not None
        await run.interrupt()
        await run.close()
        await self.wait_idle()

    def _drop(self, turns: list[UserTurn]) -> None:
        """Record the accepted ids a stop drops (queued turns are never transcribed yet),
        mark their acceptance records failed, so that no reader shows them as still pending
        and no later session re-queues them, and tell the watchers they were not sent."""
        dropped = UserTurn.merge(turns)
        if not dropped.accepted_ids:
            return
        self.dropped.extend(dropped.accepted_ids)
        # a "send again" of one of them is taken afresh
        self._taken.difference_update(dropped.accepted_ids)
        task = asyncio.create_task(self._report_dropped(dropped))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _report_dropped(self, dropped: UserTurn) -> None:
        await transcript.mark_failed(dropped.accepted_ids, "stopped", fence=self.fence)
        for message_id in dropped.message_ids:
            await self.emit(
                "message_failed",
                {"threadId": str(self.thread_id), "messageId": str(message_id), "reason": "stopped"},
            )

    async def restart(self) -> None:
        """Close the run without stopping: the close handler drains into a fresh run."""
        if self.run is not None and self.phase in (Phase.READY, Phase.STREAMING):
            self._closing = True
            await self.run.close()
            await self._wait_pump()

    async def reset_session(self) -> None:
        self.engine_session_id = None  # a run started from now on does not resume the old one
        await self.stop()
        self.engine_session_id = None  # the stopped run may have reported the old id meanwhile
        await transcript.save_engine_session_id(self.thread_id, "", self.fence)

    async def drain(self) -> None:
        """A graceful shutdown: start no new turn; once the turn in flight (if any) lands,
        close the run without dropping the queue (it stays pending for the next owner)."""
        self.draining = True
        if self.phase is Phase.STREAMING:
            return  # ``finish_draining`` closes it after the result, or after the grace period
        await self.finish_draining(in_time=True)

    async def finish_draining(self, *, in_time: bool) -> None:
        """Close the run. ``in_time`` False: the grace period ran out mid-turn; the turn ends
        with an error step (what was streamed of the reply is kept)."""
        run = self.run
        if run is None or self.phase not in (Phase.READY, Phase.STREAMING):
            return
        if self.phase is Phase.STREAMING:
            if not in_time:
                await self._flush_reply()
                await self._keep_partial_replies(interrupted=False)
                await self.emit("new_message", await self._error_step(SERVER_STOPPED_TEXT))
                await self._settle_turn("error")
                await self.emit("task_end", None)
            self._was_busy = True
            self._move(Phase.STOPPING)
            self._closing = True
            await run.interrupt()
        else:
            self._closing = True
        await run.close()
        await self._wait_pump(timeout=5)

    async def interrupt(self) -> None:
        if self.run is not None and self.phase is Phase.STREAMING:
            await self.run.interrupt()

    # --- for observers (tests, metrics) ---------------------------------------------------

    def ready_for_turn(self) -> bool:
        """A send handed over now starts its turn on the open run at once (nothing before it)."""
        return (
            self.phase is Phase.READY
            and self.run is not None
            and self._handing_over == 0
            and not self.queue
            and not self.refuses_sends()
        )

    def refuses_sends(self) -> bool:
        """``send()`` would return False now (the caller has to enqueue)."""
        return (
            self.is_busy()
            or self.phase is Phase.STOPPING
            or self.in_close_window()
            or self._closing
            or self.draining
        )

    def has_work_in_flight(self) -> bool:
        """A close, a hand-over or a background write is still under way."""
        return self._closing or self._handing_over > 0 or bool(self._background)
