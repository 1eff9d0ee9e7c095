"""The in-process half of a chat session: user session, chat context, running hooks.

The session record (``SocketSession``) is the source of truth; a ``LiveSession`` is this
process's working copy, built from the record when the session's socket arrives here and
reused across reconnects to the same process as long as no other process held the session
in between (``generation``).
"""

import asyncio
import functools
import json
import logging
import threading
import uuid
from collections.abc import Awaitable, Callable
from contextvars import Token
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User

from chatproject import log_context, tracing
from sessions_app import fence_checks, metrics, records
from sessions_app.chat.context import (
    SYSTEM_KEYS,
    ChatContext,
    current_session,
    turn_message,
    turn_message_shown_as,
)
from sessions_app.chat.elements import incoming_elements
from sessions_app.chat.message import Message
from sessions_app.chat.step import Step
from sessions_app.chat_settings import declared_inputs
from sessions_app.database import database_sync_to_async
from sessions_app.emitter import emit_encoded, emit_to_session
from sessions_app.event_frames import encode_event
from sessions_app.models import SocketSession
from sessions_app.replies import PendingReply, ReplySlot
from sessions_app.runtime import transcript
from sessions_app.runtime.chat_session import SERVER_STOPPED_TEXT
from sessions_app.runtime.engines.base import UserTurn
from sessions_app.thread_bus import publish_encoded, watched_by_others
from sessions_app.turns import TurnClaim, stop_handlers
from threads_app import fencing, step_budgets
from threads_app import services as thread_services
from threads_app.fencing import Fence, Fenced
from threads_app.models import AcceptedMessage, Thread
from threads_app.models import Step as ThreadStep
from threads_app.selectors import context_step_dicts, newest_within_context
from threads_app.wire import client_id_of, live_user_step, step_fields

logger = logging.getLogger(__name__)

# Clicks of one session waiting for their turn, at most: a burst within the click budget
# queues no more callbacks (each a task holding its arguments) than this.
MAX_WAITING_CLICKS = 4

# How long a stopped (or failed) turn waits, at most, for the step changes of it already
# running outside its task (a LangChain handler's, handed to the loop from an app thread)
# before it closes its open steps: a change in the middle of its database write would land
# after the close, reopening or overwriting a closed step (or leaving one open). Bounded so
# that a write that hangs cannot hold the stop up; ``wait_current`` gives the turn 5 s.
TURN_WORK_GRACE = 2.0


# Events that show something of a turn's answer: the first one is its "first token".
OUTPUT_EVENTS = frozenset({"stream_start", "stream_token", "new_message", "update_message"})


class _TurnLost(Exception):
    """A turn's writes were refused: another process took the turn over (``_lose``)."""


class TooManyWaiting(Exception):
    """The session already has as many hooks of this kind waiting as it may."""


def entry_of(step: dict[str, Any]) -> Message | Step:
    """A StepDict as the app sees it: a ``chat.Message`` or, for the work of a turn (a tool
    call...), a ``chat.Step``."""
    return Message.from_step(step) if "message" in (step.get("type") or "") else Step.from_dict(step)


def _show_as_written(entry: Message | Step, stored: dict[str, Any]) -> None:
    """Make the app's object say what the transcript keeps of it (``stored``: the fields of a
    text cut by a budget), so what is emitted next, and what the chat context holds, is what
    every later read shows."""
    if not (stored.get("metadata") or {}).get(step_budgets.TRUNCATED_KEY):
        return
    entry.metadata = {**entry.metadata, step_budgets.TRUNCATED_KEY: True}
    if isinstance(entry, Message):
        entry.content = stored["output"]
    else:
        entry.output = stored["output"]
        entry.input = stored["input"]


class LiveSession:
    def __init__(self, record: SocketSession, user: User) -> None:
        self.id: uuid.UUID = record.id
        self.user = user
        self.thread_id: uuid.UUID = record.thread_id
        self.thread_id_to_resume: uuid.UUID | None = record.thread_id_to_resume
        self.client_type = record.client_type
        self.chat_profile = record.chat_profile
        self.chat_settings: dict[str, Any] = dict(record.chat_settings)
        # The inputs the app declared (``chat.ChatSettings``), as on the wire; [] if none.
        self.chat_settings_inputs: list[dict[str, Any]] = declared_inputs(record.user_session)
        self.user_env: dict[str, Any] = dict(record.user_env)
        self.user_session: dict[str, Any] = {
            k: v for k, v in record.user_session.items() if k not in SYSTEM_KEYS
        }
        self.has_first_interaction = record.has_first_interaction
        self.chat_started = record.chat_started
        self.resumed = record.resumed
        self.generation = record.generation
        self.restored = False
        self.cleared = False
        # The steps a resume of this connection carries when its client asked for a page
        # (auth ``resumeSteps``); None: the whole transcript within RESUME_MAX_BYTES.
        self.resume_steps: int | None = None
        # Puts the session's socket on a thread's bus (set by the socket's consumer): a resume
        # joins the bus before it reads the history, so that nothing published between the
        # read and the join is missed.
        self.follow_thread: Callable[[uuid.UUID], Awaitable[None]] | None = None
        self.chat_context = ChatContext()
        # After a move between processes the context is rebuilt lazily, before the next hook,
        # so that a reconnect itself never reads the history.
        self._context_loaded = not record.has_first_interaction
        self._turn_lock = asyncio.Lock()
        # The turn lock is held for a send being accepted with its turn's claim (``reserve_turn``).
        self._reserved = False
        # Turns claimed with their send, waiting for the send's ack to go out first.
        self._start_after_ack: list[asyncio.Event] = []
        self._save_lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[Any]] = set()
        self.current_task: asyncio.Task[Any] | None = None
        # Tasks doing the running turn's step changes outside its task (``add_turn_work``).
        self._turn_work: set[asyncio.Task[Any]] = set()
        # The running turn's cancellation has reached it (its hook is gone): ``wait_current``
        # stops cancelling it again, which would cut its closing of the steps short.
        self._cancel_landed = False
        # The turn whose hook is over (stopped or failed) and which is closing its steps.
        self._closing_turn: asyncio.Task[Any] | None = None
        self.stopping = False
        # The process is shutting down: a hook cancelled now ends with an error, not "stopped".
        self.shutting_down = False
        # Accepted sends waiting for their turn (hooks-API apps) and their turns, by key.
        self._waiting: dict[uuid.UUID, tuple[AcceptedMessage, asyncio.Task[Any]]] = {}
        # The thread row sends are accepted into, read once per thread id and socket (a
        # deletion while the socket is here ends the session through ``thread_deleted``).
        self._thread: Thread | None = None
        # What ``persist`` last wrote: an unchanged user session is not written again.
        self._persisted: str | None = None
        # Messages a running hook is streaming: a stop keeps what was streamed of them.
        # (and the steps it has open).
        self._open_streams: dict[uuid.UUID, Message | Step] = {}
        # The reply ``Message.send()`` left for the turn's release (``sessions_app.replies``).
        self._reply = ReplySlot()
        # Click callbacks queued and not started (``run_click``).
        self._waiting_clicks: set[asyncio.Task[Any]] = set()
        # The settings the queued ``on_settings_update`` will get: set while one is queued
        # and not started, so a newer change replaces them instead of queueing another.
        self._settings_to_apply: dict[str, Any] | None = None
        self._settings_run: asyncio.Task[Any] | None = None
        stop_handlers.add(self.id, self._remote_stop)

    # --- what hooks read -----------------------------------------------------------------

    def system_value(self, key: str) -> Any:
        return {
            "id": str(self.id),
            "env": self.user_env,
            "chat_settings": self.chat_settings,
            "chat_settings_inputs": self.chat_settings_inputs,
            "chat_profile": self.chat_profile,
            "client_type": self.client_type,
            "user": self.user,
        }[key]

    def to_persistable(self) -> dict[str, Any]:
        """The user session as stored in thread metadata: JSON values only, env scrubbed."""
        data: dict[str, Any] = {}
        for key, value in self.user_session.items():
            try:
                json.dumps(value, allow_nan=False)
            except (TypeError, ValueError):
                logger.warning(
                    "user_session[%r] of session %s is not JSON; it is not persisted", key, self.id
                )
                continue
            data[key] = value
        data["chat_settings"] = self.chat_settings
        if self.chat_settings_inputs:
            data["chat_settings_inputs"] = self.chat_settings_inputs
        data["chat_profile"] = self.chat_profile
        data["client_type"] = self.client_type
        data["env"] = self.user_env if settings.PERSIST_USER_ENV else {}
        return data

    def restore_from_metadata(self, metadata: dict[str, Any]) -> None:
        """Take the user session, chat profile and settings back from a thread's metadata."""
        self.user_session = {k: v for k, v in metadata.items() if k not in SYSTEM_KEYS}
        if metadata.get("chat_profile"):
            self.chat_profile = metadata["chat_profile"]
        if isinstance(metadata.get("chat_settings"), dict):
            self.chat_settings = dict(metadata["chat_settings"])
        if metadata.get("chat_settings_inputs"):
            self.chat_settings_inputs = declared_inputs(metadata)

    def load_context(self, steps: list[dict[str, Any]], *, newest: bool = False) -> None:
        """The chat context is ``steps`` (with ``newest``, their newest within
        ``CHAT_CONTEXT_MAX_BYTES``); their entries are made when it is first used (from a
        copy of the list: a hook given it may change it meanwhile)."""
        kept = list(steps)
        self.chat_context.load(lambda: map(entry_of, newest_within_context(kept) if newest else kept))
        self._context_loaded = True

    def reload_context(self) -> None:
        """Forget the chat context; the next hook rebuilds it from the transcript."""
        self.chat_context.clear()
        self._context_loaded = False

    def release_context(self) -> None:
        """Free the chat context while the session has no socket here; the next hook reloads
        it from the transcript (every message is written there once the thread exists)."""
        if self.current_task is None and self.has_first_interaction:
            self.chat_context.clear()
            self._context_loaded = False

    async def ensure_context(self) -> None:
        """Rebuild the chat context from the transcript when it is not here: its newest
        ``CHAT_CONTEXT_MAX_BYTES`` (``selectors.context_step_dicts``)."""
        if not self._context_loaded:
            self.load_context(await database_sync_to_async(context_step_dicts)(self.thread_id))

    def forget_thread_row(self) -> None:
        self._thread = None

    async def thread(self) -> Thread:
        """The session's current thread row (``Thread.DoesNotExist`` before it is created)."""
        if self._thread is None or self._thread.pk != self.thread_id:
            self._thread = await database_sync_to_async(Thread.objects.get)(pk=self.thread_id)
        return self._thread

    # --- output ---------------------------------------------------------------------------

    async def emit(self, event: str, data: Any) -> None:
        if not await fence_checks.may_show(fencing.current.get()):
            return  # a turn that was taken over shows nothing more
        if self._reply.busy():
            await self.flush_reply()
        if event in OUTPUT_EVENTS and (meter := metrics.current_meter.get()) is not None:
            meter.output()
        await self._show(event, data)

    async def _show(self, event: str, data: Any) -> None:
        """Deliver an event of the session; what it shows of the thread (messages, steps, their
        streams and updates) goes to the thread's other tabs as well, encoded once for both,
        while there are any (``thread_bus.watched_by_others``: no publish for a thread one tab
        shows)."""
        if not (
            event in OUTPUT_EVENTS
            and self.has_first_interaction
            and watched_by_others(self.thread_id, self.id)
        ):
            await emit_to_session(self.id, event, data)
            return
        shown = encode_event(event, [data])
        await emit_encoded(self.id, shown)
        await publish_encoded(self.thread_id, shown, skip_session=self.id)

    async def save_message(self, message: Message | Step) -> None:
        """Write a message or a step to the transcript (or keep it until the thread exists)."""
        if self._reply.busy():
            await self.flush_reply()
        self._prepare_write(message)
        written = await database_sync_to_async(self._write_step)(message.to_dict())
        self._written(message, written)

    def _prepare_write(self, message: Message | Step) -> None:
        self._open_streams.pop(message.id, None)
        message.thread_id = self.thread_id
        _show_as_written(message, step_budgets.fit_step(step_fields(message.to_dict()), room=None))

    def _written(self, message: Message | Step, written: ThreadStep | None) -> None:
        if written is not None:
            message.seq = written.seq
            _show_as_written(
                message, {"input": written.input, "output": written.output, "metadata": written.metadata}
            )
        self.chat_context.add(message)

    def defer_reply(self, message: Message, event: str) -> bool:
        """Keep ``message`` (sent by the running hook, shown by ``event``) to be written with
        the turn's release or at the hook's next suspension, whichever comes first; False when
        it must be written now (``sessions_app.replies`` says when, and why this is sound)."""
        running = self.current_task
        if (
            running is None
            or running is not asyncio.current_task()
            or self._reply.busy()
            or message.actions
            or message.elements
        ):
            return False
        self._prepare_write(message)
        self._reply.pending = PendingReply(message, event, message.to_dict())
        self.chat_context.add(message)
        asyncio.get_running_loop().call_soon(self._flush_soon)
        return True

    def _flush_soon(self) -> None:
        if self._reply.pending is not None:
            self._reply.flushing = asyncio.ensure_future(self.flush_reply())

    async def flush_reply(self) -> None:
        """Write and show the pending reply, if any; wait for a flush under way."""
        async with self._reply.lock:
            pending = self._reply.take()
            if pending is None:
                return
            written = await database_sync_to_async(self._write_step)(pending.step)
            await self._show_reply(pending, written)

    async def _show_reply(self, pending: PendingReply, written: ThreadStep | None) -> None:
        self._written(pending.message, written)
        if (meter := metrics.current_meter.get()) is not None:
            meter.output()
        await self._show(pending.event, pending.message.shown_dict())

    async def _reply_for_release(self) -> PendingReply | None:
        """The pending reply, taken for the release's database call (after a flush under way)."""
        if not self._reply.busy():
            return None
        async with self._reply.lock:
            return self._reply.take()

    def _write_step(self, step: dict[str, Any]) -> ThreadStep | None:
        """The step as stored (its text within the budgets), or None while it is deferred."""
        if not self.has_first_interaction and records.defer_step(self.id, step):
            return None
        return thread_services.upsert_step(self.thread_id, uuid.UUID(step["id"]), **step_fields(step))

    def track_stream(self, message: Message | Step) -> None:
        """A hook started streaming ``message`` (its text so far is on the user's screen)."""
        self._open_streams[message.id] = message

    def add_turn_work(self, task: "asyncio.Task[Any]") -> None:
        """``task`` makes a step change of the running turn outside the turn's own task (a
        LangChain handler's change, handed to the loop from another thread): a turn that is
        stopped or fails lets it land before it closes its open steps (``_finish_turn_work``).
        A done task leaves the set; one that failed is logged."""
        self._turn_work.add(task)
        task.add_done_callback(self._turn_work_done)

    def _turn_work_done(self, task: "asyncio.Task[Any]") -> None:
        self._turn_work.discard(task)
        if not task.cancelled() and (failure := task.exception()) is not None:
            logger.error("a step change of session %s failed", self.id, exc_info=failure)

    def closing(self, turn: "asyncio.Task[Any]") -> bool:
        """``turn``'s hook is over (stopped, or failed) and the turn is closing its steps: a
        step change of it that has not started would land after they are closed."""
        return self._closing_turn is turn

    async def _finish_turn_work(self) -> None:
        """Wait for the step changes running outside the turn's task, ``TURN_WORK_GRACE`` at
        most (``asyncio.wait``: cancelling the turn meanwhile cancels none of them)."""
        if not self._turn_work:
            return
        _done, running = await asyncio.wait(set(self._turn_work), timeout=TURN_WORK_GRACE)
        if running:
            logger.warning(
                "%d step change(s) of session %s still running after %ss; the turn's steps are closed without them",
                len(running),
                self.id,
                TURN_WORK_GRACE,
            )

    async def _keep_open_streams(self, *, interrupted: bool) -> None:
        """Transcribe what was streamed of messages the hook never finished, and show them as
        final (a stop marks them interrupted); an open step among them ends now, with its hook.
        The step changes of the turn already running elsewhere land first (``_finish_turn_work``):
        a step one of them opens is closed too, and none reopens a step closed here."""
        self._closing_turn = asyncio.current_task()
        await self._finish_turn_work()
        streams, self._open_streams = self._open_streams, {}
        for message in streams.values():
            if interrupted:
                message.metadata = {**message.metadata, "interrupted": True}
            message.streaming = False
            if isinstance(message, Step) and message.end is None:
                message.end = datetime.now(UTC)  # the hook is gone: so is the step's run
            try:
                await self.save_message(message)
                await self.emit("update_message", message.shown_dict())
            except Exception:
                logger.exception("could not keep the partial message %s of session %s", message.id, self.id)

    # --- accepted sends (hooks-API apps) ----------------------------------------------------

    def will_queue(self) -> bool:
        """A send arriving now would wait behind a turn (what its ack says as ``queued``)."""
        return self.current_task is not None or bool(self._waiting) or self._reserved

    def answer_send(self, send: AcceptedMessage, *, with_attachments: bool = True) -> None:
        """Queue ``on_message`` for an accepted send (``will_queue`` said whether it waits).
        Its user step is transcribed when its turn begins, so the transcript reads in turn order.
        ``with_attachments``: the send may carry files (its elements are read for its turn);
        False only when the send is known to have named no upload, which saves the turn a query."""
        task = self.run_hook(
            self._answer,
            with_attachments,
            send=send.pk,
            prelude=functools.partial(self.transcribe_send, send),
        )
        self._waiting[send.pk] = (send, task)
        metrics.turns_queued.labels(metrics.HOOKS).inc()

    async def reserve_turn(self) -> bool:
        """Take the session's turn lock for a send whose accepting trip will also claim its
        turn (``hook_sends``); only when no hook of the session runs or waits here, so that
        this never suspends and nothing queued here is overtaken. False: the send queues
        behind them as usual. ``answer_claimed_send`` or ``release_reservation`` follows."""
        if self._tasks or self._turn_lock.locked() or self.current_task is not None or self._reserved:
            return False
        await self._turn_lock.acquire()  # free, with no waiter: returns without suspending
        self._reserved = True
        return True

    def release_reservation(self) -> None:
        self._reserved = False
        self._turn_lock.release()

    def start_after_ack(self, event: asyncio.Event) -> None:
        """Let a claimed turn start once the socket has sent the ack of its send (``acked``):
        the client learns its send was accepted before it sees the send's user step."""
        self._start_after_ack.append(event)

    def acked(self) -> None:
        """The ack of the frame just handled went out (or never will): turns may start."""
        waiting, self._start_after_ack = self._start_after_ack, []
        for event in waiting:
            event.set()

    def answer_claimed_send(self, send: AcceptedMessage, claim: TurnClaim, announced: asyncio.Event) -> None:
        """Run ``on_message`` for a send whose accepting trip claimed its turn and wrote its
        user step (``claim.prelude_result``): the reserved turn lock passes to its task, which
        starts once the send is ``announced`` on the thread's bus. Synchronous, so that a
        claim won is always released by a turn."""
        self.run_hook(
            self._answer,
            False,
            send=send.pk,
            prelude=functools.partial(self.transcribe_send, send),
            claim=claim,
            announced=announced,
        )

    def transcribe_send(self, send: AcceptedMessage) -> dict[str, Any]:
        """The send's user step, written as its turn is claimed (in the claim's database call),
        under the turn's claim and the send's: a send another process took over while this one
        stalled is that process's to answer (``Fenced``)."""
        turn = fencing.current.get()
        if turn is not None:  # the turn's owner is this process: the send's holder must be too
            turn = turn.with_also(Fence(AcceptedMessage, send.pk, "holder", None, turn.owner, None))
        return transcript.user_step(self.thread_id, UserTurn.of_send(send), self.user.get_username(), turn)

    async def _answer(self, with_attachments: bool, step: dict[str, Any]) -> None:
        from sessions_app.chat.hooks import load_app  # the registry imports this package

        message = Message.from_step(step)
        turn_message.set(message.id)  # the parent of the steps on_message opens
        turn_message_shown_as.set(client_id_of(step))
        self.chat_context.add(message)
        # One encoding for this socket and the thread's, under the id the client chose.
        shown = encode_event("new_message", [live_user_step(step)])
        await emit_encoded(self.id, shown)
        await publish_encoded(self.thread_id, shown, skip_session=self.id)
        if with_attachments:
            message.elements = await incoming_elements(message.id)
        on_message = load_app().on_message
        if on_message is not None:
            await on_message(message)

    async def answer_again(self, on_message: Callable[[Message], Awaitable[Any]], message: Message) -> None:
        """``on_message`` for an edited message: the steps it opens nest under it, as a send's,
        and every tab of the thread sees its answer."""
        turn_message.set(message.id)
        turn_message_shown_as.set(client_id_of(message.to_dict()))
        await on_message(message)

    # --- clicks and settings changes: bounded queues ---------------------------------------

    def clicks_full(self) -> bool:
        return len(self._waiting_clicks) >= MAX_WAITING_CLICKS

    def run_click(self, callback: Callable[..., Awaitable[Any]], *args: Any) -> None:
        """Queue an action callback; TooManyWaiting when ``MAX_WAITING_CLICKS`` already wait."""
        if self.clicks_full():
            raise TooManyWaiting(f"{MAX_WAITING_CLICKS} clicks are waiting")
        task = self.run_hook(self._click, callback, args)
        self._waiting_clicks.add(task)
        task.add_done_callback(self._waiting_clicks.discard)

    async def _click(self, callback: Callable[..., Awaitable[Any]], args: tuple[Any, ...]) -> None:
        current = asyncio.current_task()
        if current is not None:
            self._waiting_clicks.discard(current)  # its turn has begun
        await callback(*args)

    def update_settings(self, on_settings_update: Callable[[dict[str, Any]], Awaitable[Any]]) -> None:
        """Run ``on_settings_update`` with the session's settings. A change made while an
        earlier one still waits for its turn supersedes it: the waiting run gets the latest
        settings, and no second run is queued (what a settings panel's user means)."""
        queued = self._settings_to_apply is not None
        self._settings_to_apply = dict(self.chat_settings)
        if not queued:
            self._settings_run = self.run_hook(self._apply_settings, on_settings_update, with_task=False)
            self._settings_run.add_done_callback(self._settings_run_ended)

    def _settings_run_ended(self, task: "asyncio.Task[Any]") -> None:
        # A run that started took the settings; one cancelled before it started leaves them.
        if task is self._settings_run:
            self._settings_run = None
            self._settings_to_apply = None

    async def _apply_settings(self, on_settings_update: Callable[[dict[str, Any]], Awaitable[Any]]) -> None:
        values, self._settings_to_apply = self._settings_to_apply, None
        if values is not None:
            await on_settings_update(values)

    def drop_waiting(self) -> list[AcceptedMessage]:
        """Cancel the sends waiting for their turn (a stop); returns them."""
        waiting, self._waiting = self._waiting, {}
        for _send, task in waiting.values():
            task.cancel()
        if waiting:
            metrics.turns_queued.labels(metrics.HOOKS).dec(len(waiting))
            metrics.sends_dropped.labels(metrics.HOOKS).inc(len(waiting))
        return [send for send, _task in waiting.values()]

    async def delete_message(self, message: Message | Step) -> None:
        if self._reply.busy():
            await self.flush_reply()
        self.chat_context.remove(message)
        await database_sync_to_async(thread_services.delete_step)(self.thread_id, message.id)

    async def persist(self) -> None:
        """Save the persistable user session to the record and (once it exists) the thread."""
        async with self._save_lock:
            persistable = self.to_persistable()
            thread_id = self.thread_id if self.has_first_interaction else None
            saved = json.dumps([str(thread_id), persistable, self.chat_profile], sort_keys=True)
            if saved == self._persisted:
                return
            await database_sync_to_async(records.save_user_session)(
                self.id,
                thread_id=thread_id,
                persistable=persistable,
                chat_profile=self.chat_profile,
                chat_settings=self.chat_settings,
            )
            self._persisted = saved

    # --- running hooks --------------------------------------------------------------------

    def run_hook(
        self,
        hook: Callable[..., Awaitable[Any]],
        *args: Any,
        with_task: bool = True,
        send: uuid.UUID | None = None,
        prelude: Callable[[], Any] | None = None,
        claim: TurnClaim | None = None,
        announced: asyncio.Event | None = None,
    ) -> asyncio.Task[Any]:
        """Run a hook as a task of this session; hooks of one session never overlap. ``send``
        names the accepted send the turn answers: its outcome is recorded when the turn ends.
        ``prelude`` (synchronous database work) runs as the turn is claimed; the hook gets its
        result as its last argument. ``claim``: the turn was claimed already, with the turn
        lock reserved for it (``answer_claimed_send``); the hook waits for ``announced``."""
        run = self._run(hook, args, with_task, send, prelude, claim, announced)
        if send is not None and tracing.enabled():  # a turn's span, child of its send's
            run = tracing.traced(
                "turn",
                {
                    "tether.kind": metrics.HOOKS,
                    "tether.thread": str(self.thread_id),
                    "tether.sends": str(send),
                },
                run,
            )
        task = asyncio.create_task(run)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _run(
        self,
        hook: Callable[..., Awaitable[Any]],
        args: tuple[Any, ...],
        with_task: bool,
        send: uuid.UUID | None,
        prelude: Callable[[], Any] | None,
        taken: TurnClaim | None,
        announced: asyncio.Event | None,
    ) -> None:
        name = getattr(hook, "__name__", hook)
        outcome = AcceptedMessage.Outcome.REPLIED
        reply: PendingReply | None = None
        meter = metrics.current_meter.get() if send is not None else None
        log_context.bind(session=self.id, thread=self.thread_id)
        if taken is None:
            await self._turn_lock.acquire()
        running = False
        try:
            async with taken or TurnClaim(self.id, prelude) as claim:
                self._reserved = False
                if send is not None:
                    # its turn has begun: a stop no longer drops it
                    if self._waiting.pop(send, None) is not None:
                        metrics.turns_queued.labels(metrics.HOOKS).dec()
                    metrics.turns_running.labels(metrics.HOOKS).inc()
                    running = True
                    log_context.bind(turn=uuid.uuid4().hex[:12], send=send)
                    logger.info("turn of send %s began", send)
                if isinstance(claim.prelude_result, Fenced):  # the send is another process's now
                    self._lose(claim, claim.prelude_result)
                    raise _TurnLost
                self.current_task = asyncio.current_task()
                self._cancel_landed = False
                self._closing_turn = None
                self.stopping = False
                current_session.set(self)
                if with_task:
                    await self.emit("task_start", None)
                try:
                    if announced is not None:
                        await announced.wait()
                    if prelude is not None:
                        if isinstance(claim.prelude_result, Exception):
                            raise claim.prelude_result
                        args = (*args, claim.prelude_result)
                    await self.ensure_context()
                    await hook(*args)
                except asyncio.CancelledError:
                    self._cancel_landed = True
                    logger.info("hook %s of session %s was cancelled", name, self.id)
                    if self.shutting_down:
                        outcome = AcceptedMessage.Outcome.ERROR
                        await self._keep_open_streams(interrupted=False)
                        await self._report_error(None)
                    else:
                        outcome = AcceptedMessage.Outcome.INTERRUPTED
                        await self._keep_open_streams(interrupted=True)
                except Exception as exc:
                    if isinstance(exc, Fenced) or fencing.is_lost(claim.fence):
                        self._lose(claim, exc)
                        raise _TurnLost from exc
                    logger.exception("hook %s of session %s failed", name, self.id)
                    outcome = AcceptedMessage.Outcome.ERROR
                    await self._keep_open_streams(interrupted=False)
                    await self._report_error(exc)
                finally:
                    self.current_task = None
                    if send is not None:
                        claim.settle(send, outcome)
                    if not self.cleared and not claim.lost:
                        try:
                            await self.persist()
                        except Fenced as exc:
                            self._lose(claim, exc)
                    # A reply the hook sent last is written by the release's database call.
                    reply = await self._reply_for_release()
                    if reply is not None:
                        claim.write_last(functools.partial(self._write_step, reply.step))
            if claim.lost:
                return  # taken over: the new owner shows what it answers
            if reply is not None:
                with tracing.part("reply"):
                    await self._after_release(reply, claim.last_written)
            # Counted before task_end goes out: whoever hears it finds the turn counted.
            if running:
                running = False
                self._turn_ended(outcome, meter)
            # The claim is released before task_end goes out: a reconnect that hears task_end
            # must not find the turn still claimed (it would announce task_start for nothing).
            if with_task and not self.stopping:
                await self.emit("task_end", None)
        except _TurnLost:
            pass  # logged by ``_lose``
        finally:
            self._reserved = False
            self._turn_lock.release()
            if running:  # the turn ended in an exception
                self._turn_ended(outcome, meter)

    def _turn_ended(self, outcome: str, meter: metrics.TurnMeter | None) -> None:
        metrics.turns_running.labels(metrics.HOOKS).dec()
        metrics.turns.labels(metrics.HOOKS, str(outcome)).inc()
        tracing.note_outcome(str(outcome))
        if meter is not None:
            meter.end()
        logger.info("turn of send %s ended: %s", log_context.bound().get("send"), outcome)

    def _lose(self, claim: TurnClaim, exc: BaseException) -> None:
        """The turn was taken over while it ran here (this process stalled past its lease):
        its work is dropped and nothing more of it is shown; logged once."""
        if claim.lost:
            return
        claim.lost = True
        self._open_streams.clear()
        self._reply.take()
        logger.warning(
            "work of session %s was taken over by another process while this one ran it (%s); it was dropped",
            self.id,
            exc,
        )

    async def _after_release(self, reply: PendingReply, written: Any) -> None:
        """Show the reply the release wrote; a write that failed is reported like a hook error
        (the release recorded the send's outcome as an error)."""
        if isinstance(written, Exception):
            logger.error("could not write the reply of session %s: %r", self.id, written)
            await self._report_error(written)
            return
        await self._show_reply(reply, written)

    async def _report_error(self, exc: Exception | None) -> None:
        """Say in the transcript that the turn failed (``None``: the server stopped mid-turn)."""
        text = f"{type(exc).__name__}: {exc}" if exc is not None else SERVER_STOPPED_TEXT
        try:
            await Message(text, author="Error", is_error=True).send()
        except Exception:
            logger.exception("could not report a hook error to session %s", self.id)

    def cancel_current(self) -> bool:
        """Cancel the running hook of this process; True if there was one."""
        task = self.current_task
        if task is None or task.done():
            return False
        self.stopping = True
        task.cancel()
        return True

    async def _remote_stop(self) -> None:
        if self.cancel_current():
            await self.wait_current()

    async def wait_current(self, timeout: float = 5.0) -> None:
        """Wait for the cancelled hook to end. A cancellation that lands while the hook waits
        on a database call is swallowed by ``sync_to_async`` (it lets the call finish), so it
        is repeated until it reaches the turn (``_cancel_landed``), and no more: the turn then
        closes its steps, waiting for its step changes, which another cancel would cut short."""
        task = self.current_task
        if task is None:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not task.done() and loop.time() < deadline:
            await asyncio.wait({task}, timeout=0.1)
            if not task.done() and (self.stopping or self.shutting_down) and not self._cancel_landed:
                task.cancel()

    def pending_hooks(self) -> int:
        """Hooks of this session running or queued (what a burst of input could grow)."""
        return len(self._tasks)

    def cancel_all(self) -> None:
        for task in list(self._tasks):
            task.cancel()

    def activate(self) -> "Token[LiveSession | None]":
        """Make this the current session in the calling context (for handlers, not hooks)."""
        return current_session.set(self)

    def deactivate(self, token: "Token[LiveSession | None]") -> None:
        current_session.reset(token)


class LiveSessions:
    """This process's live sessions by id. Guarded by a lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sessions: dict[uuid.UUID, LiveSession] = {}

    def get(self, session_id: uuid.UUID) -> LiveSession | None:
        with self._lock:
            return self._sessions.get(session_id)

    def put(self, session: LiveSession) -> None:
        with self._lock:
            self._sessions[session.id] = session
            metrics.sessions_live.set(len(self._sessions))

    def clear(self) -> None:
        with self._lock:
            self._sessions.clear()
            metrics.sessions_live.set(0)

    def all(self) -> list[LiveSession]:
        with self._lock:
            return list(self._sessions.values())

    def remove(self, session: LiveSession) -> None:
        with self._lock:
            if self._sessions.get(session.id) is session:
                del self._sessions[session.id]
                metrics.sessions_live.set(len(self._sessions))
        stop_handlers.forget(session.id)

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)


live_sessions = LiveSessions()
