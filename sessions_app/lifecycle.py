"""The connection lifecycle: connect, connection_successful, messages, stop, clear, expiry.

Chainlit's decision tree with its known bugs fixed by construction:

- a restored session never re-runs resume or start (#3061): start/resume are claimed once
  per session in the database, so this holds across processes too;
- ``resume_thread`` is emitted before ``on_chat_resume`` runs (#2611);
- ``chat_context`` is deduplicated by step id, not identity;
- ``on_chat_end`` runs once, when the session is cleared or expires, never on a transient
  drop (#2228); the running task is cancelled and the context freed on clear (#2951);
- the user session is persisted at the end of every turn, not only on disconnect.
"""

import asyncio
import logging
import math
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, cast
from urllib.parse import unquote

from channels.layers import BaseChannelLayer, get_channel_layer
from django.conf import settings
from django.contrib.auth.models import User
from django.utils import timezone

from media_app import elements as element_service
from media_app import services as media_services
from media_app.images import ImageRejected
from sessions_app import app_settings, asks, chat_settings, hook_sends, inputs, limits, metrics, records
from sessions_app.chat.hooks import can_edit_messages, load_app
from sessions_app.chat.message import Message
from sessions_app.database import database_sync_to_async
from sessions_app.live import LiveSession, entry_of, live_sessions
from sessions_app.mailbox import mailbox
from sessions_app.runtime import chats
from sessions_app.thread_bus import publish_on_thread
from sessions_app.turns import request_remote_stop, turn_running
from threads_app import budgets
from threads_app import services as thread_services
from threads_app.budgets import SENDS
from threads_app.models import AcceptedMessage
from threads_app.selectors import (
    OMITTED_KEY,
    resume_thread_dict,
    thread_owner_and_profile,
    user_step_of,
)
from threads_app.wire import live_user_step

logger = logging.getLogger(__name__)

CLIENT_TYPES = {"webapp", "copilot", "teams", "slack", "discord", "integration"}
STOPPED_TEXT = "Task manually stopped."
THREAD_NOT_FOUND = "Thread not found."


class Refused(Exception):
    """The connection is refused; the message goes to the client in ``connect_error``."""


class BadRequest(Exception):
    """An event's payload is invalid; the message goes back to the client, with ``details``
    (more fields of the ack's error object, e.g. the ``setting`` a value was refused for)."""

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.details = details


def parse_uuid(value: Any, what: str, error: type[Exception] = BadRequest) -> uuid.UUID:
    try:
        return uuid.UUID(str(value))
    except (TypeError, ValueError, AttributeError):
        raise error(f"{what} must be a UUID") from None


# --- 4.1 connect ----------------------------------------------------------------------------


async def connect(user: User, auth: dict[str, Any], channel: str) -> LiveSession:
    """Restore the session named by ``auth['sessionId']`` or create it."""
    session_id = parse_uuid(auth.get("sessionId"), "sessionId", Refused)
    thread_id = parse_uuid(auth["threadId"], "threadId", Refused) if auth.get("threadId") else None
    thread_profile = ""  # a thread keeps the profile it was created with
    if thread_id is not None:
        found = await database_sync_to_async(thread_owner_and_profile)(thread_id)
        if found is not None and found[0] != user.pk:
            raise Refused("authorization failed")
        thread_profile = found[1] if found is not None else ""
    client_type = auth.get("clientType") or "webapp"
    if not isinstance(client_type, str) or client_type not in CLIENT_TYPES:
        raise Refused(f"clientType must be one of {sorted(CLIENT_TYPES)}")
    try:
        user_env = inputs.clean_object(
            _parse_user_env(auth.get("userEnv")), "userEnv", max_bytes=settings.USER_ENV_MAX_BYTES
        )
        profile = inputs.clean_text(auth.get("chatProfile") or "", "chatProfile", max_chars=1024)
        profile = inputs.clean_text(unquote(profile), "chatProfile")[: app_settings.MAX_NAME_CHARS]
    except inputs.InvalidInput as bad:
        raise Refused(str(bad)) from None
    resume_steps = _parse_resume_steps(auth.get("resumeSteps"))
    if not thread_profile and live_sessions.get(session_id) is None:
        # A new session (a reconnect keeps the profile its session has): one the app offers.
        profile = await app_settings.resolve_chat_profile(user, profile)
    try:
        opened = await database_sync_to_async(records.open_session)(
            session_id,
            user,
            channel=channel,
            owner=await mailbox.channel(),
            new_fields={
                "thread_id": thread_id or uuid.uuid4(),
                "thread_id_to_resume": thread_id,
                "client_type": client_type,
                "chat_profile": thread_profile or profile,
                "user_env": user_env,
            },
        )
    except records.SessionNotOwned:
        raise Refused("authorization failed") from None

    record = opened.record
    live = live_sessions.get(session_id)
    if live is None or live.cleared or live.generation != record.generation - 1:
        live = LiveSession(record, user)
        live_sessions.put(live)
    live.generation = record.generation
    live.restored = opened.restored
    live.resume_steps = resume_steps
    live.forget_thread_row()  # read again: the thread may have been deleted while no socket was here
    if opened.previous_channel and opened.previous_channel != channel:
        # Another socket held this session (a half-open drop, or a second tab): retire it.
        try:
            await cast(BaseChannelLayer, get_channel_layer()).send(
                opened.previous_channel, {"type": "session.superseded"}
            )
        except Exception as exc:  # the layer is down: the old socket's own drop detaches it
            logger.warning("could not retire the previous socket of session %s: %r", session_id, exc)
    if opened.restored and thread_id is not None and _asks_a_first_resume(live, thread_id):
        # Chainlit's frontend on a thread's page connects twice under one sessionId: first
        # before it knows the thread (its debounced connect, then on_chat_start runs), then with
        # the thread to resume. The second asks for what the first never showed: it resumes.
        live.thread_id_to_resume = thread_id
        await database_sync_to_async(records.set_fields)(live.id, thread_id_to_resume=thread_id)
    return live


def _asks_a_first_resume(live: LiveSession, thread_id: uuid.UUID) -> bool:
    """A restored session that has shown no thread yet (no message, no resume) is asked to
    resume ``thread_id``."""
    return not live.has_first_interaction and not live.resumed and thread_id != live.thread_id


def _resume_pending(live: LiveSession) -> bool:
    return live.thread_id_to_resume is not None and not live.resumed and not live.has_first_interaction


# The most steps a client may ask ``resume_thread`` to carry as its first page.
RESUME_STEPS_MAX = 1000


def _parse_resume_steps(raw: Any) -> int | None:
    """Auth ``resumeSteps``: the newest this many steps in ``resume_thread`` (a paged resume);
    absent: the whole transcript, within ``RESUME_MAX_BYTES``."""
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int) or not 1 <= raw <= RESUME_STEPS_MAX:
        raise Refused(f"resumeSteps must be an integer from 1 to {RESUME_STEPS_MAX}")
    return raw


def _parse_user_env(raw: Any) -> dict[str, Any]:
    if raw in (None, ""):
        return {}
    if isinstance(raw, dict):
        return raw
    return inputs.parse_object(raw, "userEnv", max_bytes=settings.USER_ENV_MAX_BYTES)


# --- 4.2 connection_successful --------------------------------------------------------------


async def connection_successful(live: LiveSession) -> None:
    await _connection_successful(live)
    await asks.resend_open(live)  # an ask outlives a reconnect and a reload


async def _connection_successful(live: LiveSession) -> None:
    hooks = load_app()
    engine_busy = (
        hooks.engine_runtime and live.has_first_interaction and await chats.watch(live.id, live.thread_id)
    )
    running = engine_busy or live.current_task is not None or await turn_running(live.id)
    await live.emit("task_start" if running else "task_end", None)
    await live.emit("clear_ask", None)
    await live.emit("clear_call_fn", None)
    await _show_chat_settings(live)

    shown = live.has_first_interaction or live.chat_started or live.resumed
    if live.restored and shown and not _resume_pending(live):
        # A restored session never re-runs resume (#3061) nor start; but one asked to resume a
        # thread before it showed any (``_asks_a_first_resume``) resumes it.
        return

    if live.thread_id_to_resume and hooks.on_chat_resume:
        if not await database_sync_to_async(records.claim_flag)(live.id, "resumed"):
            return
        live.resumed = True
        if await _resume(live, live.thread_id_to_resume):
            return
        await live.emit("resume_thread_error", THREAD_NOT_FOUND)
        live.thread_id = uuid.uuid4()
        live.thread_id_to_resume = None
        await database_sync_to_async(records.set_fields)(
            live.id, thread_id=live.thread_id, thread_id_to_resume=None
        )

    await _start(live)


async def _show_chat_settings(live: LiveSession) -> None:
    """The settings panel the session (or the thread it resumes) declared, with its values:
    a reloaded page shows it before the app sends it again, if it ever does."""
    if live.chat_settings_inputs:
        await live.emit(
            "chat_settings", chat_settings.wire_payload(live.chat_settings_inputs, live.chat_settings)
        )


async def _start(live: LiveSession) -> None:
    hooks = load_app()
    if hooks.on_chat_start is None or live.chat_started:
        return
    if await database_sync_to_async(records.claim_flag)(live.id, "chat_started"):
        live.chat_started = True
        live.run_hook(hooks.on_chat_start)


async def _resume(live: LiveSession, thread_id: uuid.UUID) -> bool:
    # On the thread's bus before its history is read: what another tab or process publishes
    # after the read reaches this socket live (the read carries everything before). Only the
    # owner's socket gets here: ``connect`` refused anyone else's for this thread.
    if live.follow_thread is not None:
        await live.follow_thread(thread_id)
    thread = await database_sync_to_async(resume_thread_dict)(live.user, thread_id, limit=live.resume_steps)
    if thread is None:
        return False
    live.thread_id = thread_id
    live.has_first_interaction = True
    await database_sync_to_async(records.set_fields)(live.id, has_first_interaction=True, thread_id=thread_id)
    await live.emit("first_interaction", {"interaction": "resume", "thread_id": str(thread_id)})
    live.restore_from_metadata(thread.get("metadata") or {})
    if thread[OMITTED_KEY] is None:
        # The whole transcript is here: the context is its newest part, with no second read
        # (cut to it when the context is first used: ``ChatContext.load``).
        live.load_context(thread["steps"], newest=True)
    else:
        live.reload_context()  # read within its own budget before on_chat_resume runs
    if load_app().engine_runtime:
        await chats.watch(live.id, thread_id)
    # The history goes out first, so messages the hook sends land after it (#2611).
    await live.emit("resume_thread", thread)
    await _show_chat_settings(live)
    live.run_hook(load_app().on_chat_resume, thread)  # type: ignore[arg-type]  # connect() checked it is set
    return True


# --- user messages ---------------------------------------------------------------------------


def parse_client_message(payload: Any) -> tuple[uuid.UUID, str, dict[str, Any]]:
    """Validate a ``client_message`` payload: ``{message: {id, output, ...}, fileReferences}``."""
    if not isinstance(payload, dict) or not isinstance(payload.get("message"), dict):
        raise BadRequest("client_message needs {message: {id, output}}")
    message = payload["message"]
    message_id = parse_uuid(message.get("id"), "message.id")
    try:
        output = inputs.clean_text(message.get("output", ""), "message.output")
    except inputs.InvalidInput as bad:
        raise BadRequest(str(bad)) from None
    return message_id, output, message


async def _first_interaction(live: LiveSession, text: str) -> None:
    """Create the thread (named after the first message) and flush steps sent before it."""
    try:
        await database_sync_to_async(thread_services.ensure_thread)(
            live.user, live.thread_id, name=text, chat_profile=live.chat_profile
        )
    except thread_services.ThreadNotOwned:
        # The thread was deleted meanwhile: this chat continues in a new one.
        live.thread_id = uuid.uuid4()
        await database_sync_to_async(records.set_fields)(live.id, thread_id=live.thread_id)
        await database_sync_to_async(thread_services.ensure_thread)(
            live.user, live.thread_id, name=text, chat_profile=live.chat_profile
        )
    won = await database_sync_to_async(records.claim_flag)(live.id, "has_first_interaction")
    live.has_first_interaction = True
    if won:
        for step in await database_sync_to_async(records.take_deferred_steps)(live.id):
            await live.save_message(entry_of(step))
        await live.emit("first_interaction", {"interaction": text, "thread_id": str(live.thread_id)})


first_interaction = _first_interaction  # for a text ask's reply and an action click (asks, actions)


async def attached_uploads(live: LiveSession, references: Any) -> list[uuid.UUID]:
    """The uploads a hooks-API send names, checked to be the sender's before it is accepted."""
    try:
        upload_ids = media_services.parse_references(references)
        if upload_ids:
            await database_sync_to_async(element_service.check_uploads)(live.user.pk, upload_ids)
    except (ImageRejected, element_service.ElementRejected) as exc:
        raise BadRequest(str(exc)) from None
    return upload_ids


async def client_message(live: LiveSession, payload: Any) -> dict[str, Any]:
    message_id, text, _raw = parse_client_message(payload)
    retry = payload.get("retry") is True  # "send again" of a send that failed
    wait = await limits.wait_before_next_send(live.user)
    if wait is not None:
        metrics.budget_refusals.labels(SENDS.name, metrics.SOCKET).inc()
        raise BadRequest(
            f"too many messages: the send rate is limited; send again in {math.ceil(wait)} s",
            retryAfter=math.ceil(wait),
        )
    hooks = load_app()
    images: list[dict[str, Any]] = []
    if hooks.engine_runtime:
        # Photos come as uploads (POST /api/uploads/) named in fileReferences: the socket's
        # frames are too small for them. Checked before anything is recorded.
        try:
            upload_ids = media_services.parse_references(payload.get("fileReferences"))
            if upload_ids:
                send_key = AcceptedMessage.key(live.thread_id, message_id)
                images = await database_sync_to_async(media_services.blocks_for_uploads)(
                    live.user, upload_ids, send_key
                )
        except ImageRejected as exc:
            raise BadRequest(str(exc)) from None
    else:
        # A hooks-API app gets the files (photos or others) as ``message.elements``.
        upload_ids = await attached_uploads(live, payload.get("fileReferences"))
    if not live.has_first_interaction:
        await _first_interaction(live, text)
    thread = await live.thread()
    if thread.deleted_at is not None:
        raise BadRequest("this thread was deleted; start a new chat")
    try:
        if hooks.engine_runtime:
            return await chats.accept_and_submit(
                user=live.user,
                thread=thread,
                message_id=message_id,
                text=text,
                images=images,
                session_id=live.id,
                retry=retry,
            )
        return await hook_sends.accept_and_answer(
            live, thread, message_id, text, retry=retry, upload_ids=upload_ids
        )
    except thread_services.MessageConflict:
        raise BadRequest("this message id was already used for a different message") from None


async def edit_message(live: LiveSession, payload: Any) -> dict[str, Any]:
    """Replace a user message's text, drop what came after it in the transcript (whichever
    tab or session wrote it), show that in every tab of the thread, and answer it again."""
    message_id, text, _raw = parse_client_message(payload)
    if not text.strip():
        raise BadRequest("an edited message needs text")
    if load_app().engine_runtime:
        return await _edit_in_engine_chat(live, message_id, text)
    if not can_edit_messages():
        raise BadRequest("this app answers no messages")
    if live.current_task is not None or await turn_running(live.id):
        raise BadRequest("wait for the reply (or stop it) before editing a message")
    step = await database_sync_to_async(user_step_of)(live.thread_id, message_id)
    if step is None or step.get("seq") is None:
        raise BadRequest("no user message with this id in the thread")
    await live.ensure_context()
    target = next((m for m in live.chat_context.get() if m.id == step["id"]), None)
    if not isinstance(target, Message):
        target = Message.from_step(step)  # older than the context the session keeps
    removed = await database_sync_to_async(thread_services.delete_steps_after)(live.thread_id, step["seq"])
    for entry in [m for m in live.chat_context.get() if m.seq is not None and m.seq > step["seq"]]:
        live.chat_context.remove(entry)
    for gone in removed:
        shown = live_user_step(gone)
        await live.emit("delete_message", shown)
        await publish_on_thread(live.thread_id, "delete_message", shown, skip_session=live.id)
    token = live.activate()
    try:
        target.content = text
        await target.update()  # on every tab, as all the session shows of the thread
    finally:
        live.deactivate(token)
    on_message = load_app().on_message
    assert on_message is not None  # can_edit_messages
    live.run_hook(live.answer_again, on_message, target)
    return {"threadId": str(live.thread_id), "messageId": str(message_id)}


async def _edit_in_engine_chat(live: LiveSession, message_id: uuid.UUID, text: str) -> dict[str, Any]:
    """An engine-runtime app's edit, made where the thread runs (``chats.edit_here``): the
    engine forgets what followed the message, which is answered again; refused for an engine
    that cannot forget (``engines.can_rewind``) and while a turn runs or waits."""
    step = await database_sync_to_async(user_step_of)(live.thread_id, message_id)
    if step is None or step.get("seq") is None:
        raise BadRequest("no user message with this id in the thread")
    refused = await chats.edit(
        live.thread_id,
        session_id=live.id,
        author=live.user.get_username(),
        seq=step["seq"],
        send=uuid.UUID(step["id"]),
        text=text,
    )
    if refused:
        raise BadRequest(refused)
    return {"threadId": str(live.thread_id), "messageId": str(message_id)}


async def chat_settings_change(live: LiveSession, payload: Any) -> None:
    """Apply a change of the chat settings and run ``on_settings_update`` with all of them.
    Once the app declared its settings, a change is checked against them (all or nothing);
    before that, any storable JSON object is taken, as before."""
    if live.chat_settings_inputs:
        try:
            values = chat_settings.validate_change(live.chat_settings_inputs, live.chat_settings, payload)
            inputs.clean_object(values, "chat settings", max_bytes=settings.CHAT_SETTINGS_MAX_BYTES)
        except chat_settings.InvalidSetting as bad:
            raise BadRequest(str(bad), setting=bad.setting) from None
        except inputs.InvalidInput as bad:
            raise BadRequest(str(bad)) from None
        live.chat_settings = values
        await _settings_updated(live)
        return
    try:
        changes = inputs.clean_object(payload, "chat settings", max_bytes=settings.CHAT_SETTINGS_MAX_BYTES)
        inputs.clean_object(
            {**live.chat_settings, **changes}, "chat settings", max_bytes=settings.CHAT_SETTINGS_MAX_BYTES
        )
    except inputs.InvalidInput as bad:
        raise BadRequest(str(bad)) from None
    live.chat_settings.update(changes)
    await _settings_updated(live)


async def _settings_updated(live: LiveSession) -> None:
    hooks = load_app()
    if hooks.on_settings_update is not None:
        live.update_settings(hooks.on_settings_update)
    else:
        await live.persist()


# --- 4.6 stop, disconnect, clear, expiry ------------------------------------------------------


async def stop(live: LiveSession) -> None:
    """Cancel the running turn (here or in another process), say so once, run on_stop.
    What was streamed of the reply is kept (marked interrupted); sends waiting behind it are
    dropped and reported as not sent."""
    if load_app().engine_runtime:
        await chats.stop(live.thread_id)
    else:
        await hook_sends.drop_waiting(live, "stopped")
        await _cancel_turn(live)
    token = live.activate()
    try:
        # A notice, not a reply (``metadata.notice``): the page says a stop once, by the
        # reply it cut when there is one, and offers no feedback on it.
        await Message(STOPPED_TEXT, metadata={"notice": "stopped"}).send()
    finally:
        live.deactivate(token)
    await _call_in_session(live, load_app().on_stop)
    await live.emit("task_end", None)


async def _cancel_turn(live: LiveSession) -> None:
    """Cancel the session's running hook, in this process or (through its mailbox) another."""
    if live.cancel_current():
        await live.wait_current()
    else:
        await request_remote_stop(live.id)


async def _call_in_session(live: LiveSession, hook: Callable[[], Awaitable[Any]] | None) -> None:
    """Run a lifecycle hook (on_stop, on_chat_end) now, as the current session; its failure
    is logged, never raised into the handler that called it."""
    if hook is None:
        return
    token = live.activate()
    try:
        await hook()
    except Exception:
        logger.exception("%s of session %s failed", getattr(hook, "__name__", hook), live.id)
    finally:
        live.deactivate(token)


async def disconnect(live: LiveSession, channel: str) -> None:
    """A transport drop: persist and keep the session for SESSION_TIMEOUT seconds."""
    await budgets.give_back_all(live.user.pk)  # the user may go on through another process
    if live.cleared:
        return
    if not await database_sync_to_async(records.mark_disconnected)(live.id, channel):
        return  # another socket already holds the session
    await live.persist()
    live.release_context()
    asyncio.get_running_loop().call_later(
        settings.SESSION_TIMEOUT, lambda: asyncio.ensure_future(expire(live.id))
    )
    expiry_sweeper.ensure_running()


async def end_for_deleted_thread(live: LiveSession) -> None:
    """The session's thread was deleted: its running turn stops and the session ends."""
    if load_app().engine_runtime:
        await chats.stop(live.thread_id)
    await clear_session(live)


async def clear_session(live: LiveSession) -> None:
    """The "New chat" button: end the session now."""
    if await database_sync_to_async(records.claim_end)(live.id):
        await _end(live)


async def expire(session_id: uuid.UUID) -> None:
    """End a session that stayed disconnected for SESSION_TIMEOUT seconds (claimed once)."""
    cutoff = timezone.now() - timedelta(seconds=settings.SESSION_TIMEOUT)
    if not await database_sync_to_async(records.claim_end)(session_id, expired_before=cutoff):
        return
    live = live_sessions.get(session_id)
    if live is None:
        record = await database_sync_to_async(records.get_session)(session_id)
        if record is None:
            return
        user = await database_sync_to_async(lambda: record.user)()
        live = LiveSession(record, user)
    await _end(live)


async def _end(live: LiveSession) -> None:
    live.cleared = True
    await _cancel_turn(live)
    live.cancel_all()
    await asks.close_for_session(live)
    hooks = load_app()
    await _call_in_session(live, hooks.on_chat_end)
    await live.persist()
    live.chat_context.clear()
    if hooks.engine_runtime and live.has_first_interaction:
        await chats.forget(live.id, live.thread_id)
    if not hooks.engine_runtime:
        await hook_sends.fail_unanswered(live)
    live_sessions.remove(live)
    await database_sync_to_async(records.delete_session)(live.id)


class ExpirySweeper:
    """Expires sessions whose process died before its own timer fired."""

    def __init__(self) -> None:
        self._task: asyncio.Task[Any] | None = None

    def ensure_running(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._sweep())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def _sweep(self) -> None:
        period = max(1.0, min(60.0, settings.SESSION_TIMEOUT / 2))
        while True:
            await asyncio.sleep(period)
            try:
                # A socket whose process died is no socket: its session starts expiring now.
                await database_sync_to_async(records.detach_dead_sockets)()
                for session_id in await database_sync_to_async(records.expired_session_ids)(
                    settings.SESSION_TIMEOUT
                ):
                    await expire(session_id)
            except Exception:
                logger.exception("expiry sweep failed")


expiry_sweeper = ExpirySweeper()
