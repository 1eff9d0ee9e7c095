"""The chat endpoint at ``/ws/socket.io/``: parses, authorises, calls ``lifecycle``."""

import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from django.conf import settings

from chatproject import tracing
from sessions_app import actions, asks, lifecycle, limits, metrics
from sessions_app.auth import user_for_token
from sessions_app.chainlit_events import UNSERVED_EVENTS
from sessions_app.chainlit_runs import RunSteps
from sessions_app.chat import window_messages
from sessions_app.chat.hooks import load_app
from sessions_app.emitter import local_sockets, session_group
from sessions_app.event_frames import EncodedEvent, from_message
from sessions_app.live import LiveSession
from sessions_app.processes import heartbeat
from sessions_app.record_events import user_group
from sessions_app.replay import RecoveryRefused, SessionStream, requested_offset
from sessions_app.socketio_consumer import ConnectionRefused, SocketIOConsumer
from sessions_app.thread_bus import thread_group
from threads_app.budgets import ASK_ANSWERS, CLICKS, SENDS, SETTINGS_CHANGES, Budget

logger = logging.getLogger(__name__)

# Room in a frame for the packet around an event's payload (type, ack id, name, brackets).
FRAME_ENVELOPE = 1024
# Events whose payload is ignored or tiny, and names the endpoint does not serve.
SMALL_FRAME = 4096
# Asks sent to one socket whose acknowledgement is still awaited, at most.
MAX_ASKS_BY_ACK = 64
# The budget each event spends from, before its frame is parsed (``admit_event``). A
# ``client_message`` spends from SENDS once it is parsed (``lifecycle.client_message``): an
# invalid message costs nothing; an edit runs ``on_message`` again, so it is a send too.
EVENT_BUDGETS: dict[str, Budget] = {
    "action_call": CLICKS,
    "chat_settings_change": SETTINGS_CHANGES,
    "ask_answer": ASK_ANSWERS,
    "edit_message": SENDS,
    "window_message": CLICKS,
}


Handler = Callable[[LiveSession, Any], Awaitable[Any]]


def _without_payload(verb: Callable[[LiveSession], Awaitable[Any]]) -> Handler:
    async def handle(live: LiveSession, _payload: Any) -> Any:
        return await verb(live)

    return handle


# What each event calls, with the session and the event's first argument.
EVENT_HANDLERS: dict[str, Handler] = {
    "connection_successful": _without_payload(lifecycle.connection_successful),
    "client_message": lifecycle.client_message,
    "edit_message": lifecycle.edit_message,
    "chat_settings_change": lifecycle.chat_settings_change,
    "stop": _without_payload(lifecycle.stop),
    "clear_session": _without_payload(lifecycle.clear_session),
    "ask_answer": asks.answer_event,
    "action_call": actions.call,
    **UNSERVED_EVENTS,
    "window_message": window_messages.received,
}
# Chainlit's frontend reads no acks: it learns of a refusal from a ``toast`` (its UI shows one
# for each), sent beside the ``error`` event when the refused event asked for no ack.
TOAST_EVENT = "toast"


class ChatConsumer(SocketIOConsumer):
    live: LiveSession | None = None
    thread_group: str | None = None  # the bus of the thread this socket shows
    # The session's numbered events, for a client that asked for offsets (``replay``).
    stream: SessionStream | None = None
    # Chainlit's run steps drawn around a turn's messages, for a socket of Chainlit's frontend.
    runs: RunSteps | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.asks_by_ack: dict[int, uuid.UUID] = {}  # ack id of an ``ask`` sent -> the ask

    async def connect(self) -> None:
        """A socket at Chainlit's path (its frontend's) is shown runs (``chainlit_runs``)."""
        prefix = settings.CHAINLIT_PATH_PREFIX.rstrip("/")
        if prefix and str(self.scope.get("path", "")).startswith(prefix + "/"):
            self.runs = RunSteps()
        await super().connect()

    def accepting_connections(self) -> bool:
        return not heartbeat.draining

    def event_frame_limit(self, event: str | None) -> int:
        """Frames bigger than their event can need are refused before they are parsed (a
        900 KB ``chat_settings_change`` cost 2 ms of the event loop to decode, for a refusal).
        Messages may fill ``SOCKETIO_MAX_PAYLOAD``; chat settings, stored as at most
        ``CHAT_SETTINGS_MAX_BYTES`` of UTF-8 JSON, come in at most three times that (a client
        may write each non-ASCII character as a six-byte escape); other events, and names
        written with escapes (which no client does), fit in ``SMALL_FRAME``."""
        if event in ("client_message", "edit_message", "ask_answer"):  # a text answer is a message
            return int(self.max_payload)
        if event == "chat_settings_change":
            return min(int(self.max_payload), 3 * settings.CHAT_SETTINGS_MAX_BYTES + FRAME_ENVELOPE)
        return min(int(self.max_payload), SMALL_FRAME)

    async def socketio_connect(self, auth: dict[str, Any]) -> dict[str, Any] | None:
        try:
            wants_offsets, offset, pid = requested_offset(auth)
        except RecoveryRefused as bad:
            raise ConnectionRefused(str(bad)) from None
        if "token_user" in self.scope:
            user = self.scope["token_user"]  # type: ignore[typeddict-item]  # SocketAuthMiddleware's key
        elif "token" in auth:
            user = await user_for_token(auth["token"])
        else:
            user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            raise ConnectionRefused("authentication failed")
        try:
            self.live = await lifecycle.connect(user, auth, self.channel_name)
        except lifecycle.Refused as refusal:
            raise ConnectionRefused(str(refusal)) from None
        if not wants_offsets:
            return None
        self.stream = SessionStream(self, self.live.id)
        await self.stream.prepare(offset, pid)
        return {"pid": self.stream.pid}

    async def socketio_connected(self) -> None:
        assert self.live is not None
        local_sockets.attach(self.live.id, self)
        self.live.follow_thread = self._follow_thread
        await self._group("add", session_group(self.live.id))
        await self._group("add", user_group(self.live.user.pk))
        if self.stream is not None:
            await self.stream.start()  # what it missed, before anything new

    async def socketio_disconnect(self) -> None:
        """Always completes: the session is marked disconnected (so it can expire) even when
        the channel layer is down."""
        live = self.live
        if self.stream is not None:
            self.stream.close()
        if live is None:
            return
        local_sockets.detach(live.id, self)
        try:
            await lifecycle.disconnect(live, self.channel_name)
        finally:
            await self._group("discard", session_group(live.id))
            await self._group("discard", user_group(live.user.pk))
            await self._follow_thread(None)

    async def _group(self, op: str, group: str) -> bool:
        """Join or leave a channel-layer group; a layer error is logged, not raised (the
        socket still gets what this process emits to it directly)."""
        try:
            if op == "add":
                await self.channel_layer.group_add(group, self.channel_name)
            else:
                await self.channel_layer.group_discard(group, self.channel_name)
        except Exception as exc:
            logger.warning("group_%s %s for socket %s failed: %r", op, group, self.eio_sid, exc)
            return False
        return True

    async def admit_event(self, event: str, ack_id: int | None) -> bool:
        """Spend from the event's budget (``EVENT_BUDGETS``) before its frame is parsed; a
        refusal is answered with when to try again, and nothing of the event is done."""
        budget = EVENT_BUDGETS.get(event)
        if budget is None or self.live is None:
            return True
        return await self._spend(budget, event, ack_id)

    def awaits_ack(self, ack_id: int) -> bool:
        return ack_id in self.asks_by_ack

    async def admit_ack(self, ack_id: int) -> bool:
        """An ask's acknowledgement is an answer: it spends from ASK_ANSWERS. A refused one
        keeps its ask awaited, so the same acknowledgement may come again later."""
        if self.live is None:
            return True
        return await self._spend(ASK_ANSWERS, "ask", None)

    async def _spend(self, budget: Budget, event: str, ack_id: int | None) -> bool:
        assert self.live is not None
        try:
            await limits.spend(budget, self.live.user)
        except limits.OverBudget as refused:
            metrics.budget_refusals.labels(budget.name, metrics.SOCKET).inc()
            # One frame back: the ack when the client asked for one, else the error event.
            if ack_id is not None:
                await self.ack(ack_id, {"error": str(refused), "retryAfter": refused.retry_after})
            else:
                await self.emit("error", {"message": str(refused), "event": event})
                await self.toast(str(refused))
            return False
        return True

    async def refuse(
        self, message: str, *, event: str, ack_id: int | None, details: dict[str, Any] | None = None
    ) -> None:
        """Answer a refused event: the ack (for a client that reads acks) and the ``error``
        event, as ``emit_error``; and a ``toast`` when no ack was asked for."""
        await self.emit_error(message, event=event, ack_id=ack_id, details=details)
        if ack_id is None:
            await self.toast(message)

    async def toast(self, message: str) -> None:
        """An error notice Chainlit's UI shows (``{message, type}``, type ``error``)."""
        await self.emit(TOAST_EVENT, {"message": message, "type": "error"})

    async def socketio_event(self, event: str, args: list[Any], ack_id: int | None) -> None:
        handler = EVENT_HANDLERS.get(event)
        if handler is None:
            await super().socketio_event(event, args, ack_id)
            return
        if self.live is None or self.live.cleared:
            await self.emit_error(
                "the session was cleared; reconnect with a new sessionId", event=event, ack_id=ack_id
            )
            return
        live = self.live
        meter_token = None
        sending = event == "client_message"
        if sending:  # a send: its clock starts (sessions_app.metrics)
            meter = metrics.TurnMeter(metrics.ENGINE if load_app().engine_runtime else metrics.HOOKS)
            meter_token = metrics.current_meter.set(meter)
        # A send's trace starts here (chatproject.tracing; nothing happens with traces off).
        with tracing.span("socket client_message", kind="server") if sending else tracing.OFF as span:
            if span is not None:
                span.set_attribute("tether.session", str(live.id))
                span.set_attribute("tether.thread", str(live.thread_id))
            try:
                try:
                    answer = await handler(live, args[0] if args else None)
                except lifecycle.BadRequest as bad:
                    await self.refuse(str(bad), event=event, ack_id=ack_id, details=bad.details)
                    return
                except (asks.AskRefused, actions.ActionRefused) as bad:
                    await self.refuse(str(bad), event=event, ack_id=ack_id)
                    return
                except limits.OverBudget as refused:
                    await self.refuse(str(refused), event=event, ack_id=ack_id)
                    return
                await self._follow_thread(live.thread_id if live.has_first_interaction else None)
                await self.ack(ack_id, answer)
                if meter_token is not None:
                    meter.acked()
            finally:
                live.acked()  # a turn claimed with this send starts after its ack (hook_sends)
                if meter_token is not None:
                    metrics.current_meter.reset(meter_token)

    async def _follow_thread(self, thread_id: uuid.UUID | None) -> None:
        """Be on the bus of the thread this socket shows (and only that one)."""
        group = thread_group(thread_id) if thread_id else None
        if group == self.thread_group:
            return
        if self.thread_group:
            await self._group("discard", self.thread_group)
        if group:
            await self._group("add", group)
        self.thread_group = group

    # --- asks answered by acknowledgement (Chainlit's way) ----------------------------------

    async def send_event(self, encoded: EncodedEvent) -> None:
        if self.runs is None:
            await self._send_event(encoded)
            return
        for each in self.runs.rewrite(encoded):
            await self._send_event(each)

    async def _send_event(self, encoded: EncodedEvent) -> None:
        """``ask`` goes out as a call: its acknowledgement is an answer (``socketio_ack``)."""
        if encoded.event != "ask":
            await super().send_event(encoded)
            return
        args = encoded.args
        spec = args[0].get("spec") if args and isinstance(args[0], dict) else None
        if not isinstance(spec, dict) or not spec.get("askId"):
            await super().send_event(encoded)
            return
        ack_id = await self.call_encoded(encoded)
        self.asks_by_ack[ack_id] = uuid.UUID(spec["askId"])
        while len(self.asks_by_ack) > MAX_ASKS_BY_ACK:
            del self.asks_by_ack[next(iter(self.asks_by_ack))]

    async def socketio_ack(self, ack_id: int, args: list[Any]) -> None:
        ask_id = self.asks_by_ack.pop(ack_id, None)
        if ask_id is None or self.live is None or self.live.cleared:
            return
        try:
            await asks.answer_ack(self.live, ask_id, args)
        except asks.AskRefused as bad:
            await self.emit_error(str(bad), event="ask")

    # --- channel layer messages -------------------------------------------------------------

    @property
    def wants_offsets(self) -> bool:
        return self.stream is not None

    async def deliver(self, offset: int | None, encoded: EncodedEvent) -> None:
        """An event of this socket's session (``emitter``): numbered, in order and once for
        a client that asked for offsets; as it comes for any other."""
        if self.stream is not None:
            await self.stream.deliver(offset, encoded)
        else:
            await self.send_event(encoded)

    async def session_emit(self, message: dict[str, Any]) -> None:
        await self.deliver(message.get("offset"), from_message(message))

    async def session_action(self, message: dict[str, Any]) -> None:
        """A click sent over HTTP (``action_views``) for this socket's session."""
        if self.live is None or self.live.cleared:
            return
        try:
            await actions.call(self.live, message["click"])
        except actions.ActionRefused as refused:
            await self.emit_error(str(refused), event="action_call")

    async def thread_event(self, message: dict[str, Any]) -> None:
        if self.live is not None and message.get("skip_session") == str(self.live.id):
            return  # this session had it directly
        # In the trace of the work that published it (its ``traceparent``), if that was traced.
        with tracing.continued(message, "thread_bus deliver", {"tether.event": message["event"]}):
            await self.send_event(from_message(message))

    async def thread_deleted(self, message: dict[str, Any]) -> None:
        """The thread this socket shows was deleted: its turn stops, the session ends, the
        client is told and the socket closed."""
        live = self.live
        if live is None or str(live.thread_id) != message["thread"]:
            return
        await lifecycle.end_for_deleted_thread(live)
        await self.emit("thread_deleted", {"threadId": message["thread"]})
        await self.go_away()

    async def user_deactivated(self, message: dict[str, Any]) -> None:
        """The user was deactivated: the session ends and the socket is closed."""
        if self.live is not None:
            await lifecycle.clear_session(self.live)
            await self.emit("error", {"message": "this account was deactivated", "event": None})
        await self.go_away()

    async def session_superseded(self, message: dict[str, Any]) -> None:
        """Another socket restored this session; this one steps aside."""
        if self.live is not None:
            local_sockets.detach(self.live.id, self)
            await self._group("discard", session_group(self.live.id))
            await self._follow_thread(None)
            self.live = None
        await self.close()
