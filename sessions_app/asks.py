"""Questions an app waits for (``chat.AskUserMessage`` and friends), on the wire and in the
database.

Chainlit keeps an ask in one socket's pending acknowledgement, so a reconnect or a reload
loses it, and every tab showing it may answer. Tether keeps it as a row (``threads_app.
models.Ask``) from the moment it is asked:

- the question is a message step; ``ask {msg, spec}`` goes to the asking session and every
  other tab of the thread, and again to any socket of the thread that connects while it is
  open (``resend_open``), with ``spec.timeout`` the time left;
- an answer comes as the ack of ``ask`` (Chainlit's way) or as ``ask_answer {askId, answer}``
  (what a reloaded page uses); it is checked against the spec, then claimed with one
  conditional UPDATE: one answer wins, every tab gets ``clear_ask``, a late one gets an error;
- the hook waits on an in-process event (set at once when the answer lands in this process)
  and reads the row every ``POLL`` seconds, so an answer taken by another process reaches it;
- a timeout (``ask_timeout``), a stop or the session's end closes the row the same way;
- the row names the process whose hook waits (``asker``): an answer is taken only while it is
  alive, and the recovery loop closes the asks of a process that died (``close_orphaned``:
  ``clear_ask`` with a ``reason``), so an answer is never taken and then dropped.
"""

import asyncio
import contextlib
import logging
import threading
import uuid
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.contrib.auth.models import User
from django.utils import timezone

from media_app import services as media_services
from sessions_app import inputs
from sessions_app.chat.message import Message
from sessions_app.database import database_sync_to_async
from sessions_app.emitter import emit_to_session
from sessions_app.mailbox import mailbox
from sessions_app.processes import live_addresses, unreachable_addresses
from sessions_app.thread_bus import publish_on_thread
from threads_app import asks as records
from threads_app.models import Ask

if TYPE_CHECKING:
    from sessions_app.live import LiveSession

logger = logging.getLogger(__name__)

POLL = 0.5  # seconds between reads of the row while waiting (answers taken elsewhere)
MAX_TIMEOUT = 24 * 3600
MAX_FILES = 10
MAX_SIZE_MB = 100


class AskRefused(Exception):
    """An answer that cannot be taken; the message goes back to the client."""


class Waiters:
    """The events the waiting hooks of this process sleep on, by ask id. Guarded by a lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: dict[uuid.UUID, tuple[asyncio.AbstractEventLoop, asyncio.Event]] = {}

    def add(self, ask_id: uuid.UUID) -> asyncio.Event:
        event = asyncio.Event()
        with self._lock:
            self._events[ask_id] = (asyncio.get_running_loop(), event)
        return event

    def discard(self, ask_id: uuid.UUID) -> None:
        with self._lock:
            self._events.pop(ask_id, None)

    def wake(self, ask_id: uuid.UUID) -> None:
        with self._lock:
            found = self._events.get(ask_id)
        if found is not None:
            loop, event = found
            loop.call_soon_threadsafe(event.set)

    def clear(self) -> None:
        with self._lock:
            self._events.clear()


waiters = Waiters()


# --- asking ---------------------------------------------------------------------------------


async def ask(
    live: "LiveSession",
    question: Message,
    *,
    kind: str,
    spec: dict[str, Any],
    timeout: float,
    raise_on_timeout: bool = False,
) -> Any:
    """Show ``question``, open the ask and wait for its answer (the answer's JSON, or None
    when it timed out); a cancellation (stop, session end) closes it and propagates."""
    await question.send()  # on every tab of the thread, as all the session shows
    step = question.to_dict()
    timeout = max(1.0, min(float(timeout), MAX_TIMEOUT))
    record = await database_sync_to_async(records.open_ask)(
        user=live.user,
        thread_id=live.thread_id,
        session_id=live.id,
        step_id=question.id,
        kind=kind,
        spec=spec,
        message=step,
        deadline=timezone.now() + timedelta(seconds=timeout),
        asker=await mailbox.channel(),
    )
    event = waiters.add(record.pk)
    try:
        payload = records.ask_event(record)
        await live.emit("ask", payload)
        await publish_on_thread(live.thread_id, "ask", payload, skip_session=live.id)
        await live.emit("task_end", None)  # as Chainlit: the turn pauses while the user answers
        closed = await _wait(record, event)
    except asyncio.CancelledError:
        await asyncio.shield(_close(record, Ask.State.CANCELLED))
        raise
    finally:
        waiters.discard(record.pk)
    await live.emit("task_start", None)  # the turn goes on
    if closed.state != Ask.State.ANSWERED:
        if raise_on_timeout and closed.state == Ask.State.TIMED_OUT:
            raise TimeoutError(f"no answer within {timeout:g} s")
        return None
    return closed.answer


async def _wait(record: Ask, event: asyncio.Event) -> Ask:
    """Until the ask is closed: answered (here or elsewhere), or its deadline passed."""
    while True:
        left = (record.deadline - timezone.now()).total_seconds()
        if left <= 0:
            await _close(record, Ask.State.TIMED_OUT)
        else:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), min(left, POLL))
            event.clear()
        current = await database_sync_to_async(records.read_ask)(record.pk)
        if current is None:
            raise asyncio.CancelledError  # the row went with its user
        if current.state != Ask.State.OPEN:
            return current


async def _close(record: Ask, state: str) -> None:
    """Close the ask without an answer; if this call closed it, tell every tab."""
    if await database_sync_to_async(records.close_ask)(record.pk, state):
        if state == Ask.State.TIMED_OUT:
            await emit_to_session(record.session_id, "ask_timeout", {"askId": str(record.pk)})
        await announce_cleared(record)


async def announce_cleared(record: Ask, reason: str = "") -> None:
    """``clear_ask`` to the asking session and every tab of the thread (with ``reason`` when
    the page should say why the question went away)."""
    cleared = {"askId": str(record.pk), "stepId": str(record.step_id)}
    if reason:
        cleared["reason"] = reason
    await emit_to_session(record.session_id, "clear_ask", cleared)
    await publish_on_thread(record.thread_id, "clear_ask", cleared, skip_session=record.session_id)


async def resend_open(live: "LiveSession") -> None:
    """A socket of the thread (re)connected: show it the asks still waiting."""
    events = await database_sync_to_async(records.thread_ask_events)(live.user.pk, live.thread_id)
    for payload in events:
        await live.emit("ask", payload)
    if any(payload["sessionId"] == str(live.id) for payload in events):
        await live.emit("task_end", None)  # this session's turn is paused on its question


async def close_for_session(live: "LiveSession") -> None:
    """The session ended: its asks, wherever their hooks wait, are cancelled."""
    for record in await database_sync_to_async(records.close_session_asks)(live.id):
        waiters.wake(record.pk)
        await announce_cleared(record)


# --- answering ------------------------------------------------------------------------------


async def answer_event(live: "LiveSession", payload: Any) -> dict[str, Any]:
    """``ask_answer {askId | stepId, answer}``: answered ``{success, askId}``."""
    if not isinstance(payload, dict):
        raise AskRefused("ask_answer needs {askId, answer}")
    ask_id = _uuid(payload["askId"], "askId") if payload.get("askId") else None
    step_id = _uuid(payload["stepId"], "stepId") if payload.get("stepId") and ask_id is None else None
    if ask_id is None and step_id is None:
        raise AskRefused("ask_answer needs askId (or stepId)")
    record = await database_sync_to_async(records.find_open_ask)(live.user, ask_id=ask_id, step_id=step_id)
    if record is None:
        raise AskRefused("no open ask with this id: it was answered, timed out or never asked")
    await _answer(live.user, record, payload.get("answer"))
    return {"success": True, "askId": str(record.pk)}


async def answer_ack(live: "LiveSession", ask_id: uuid.UUID, args: list[Any]) -> None:
    """The client acknowledged ``ask`` (Chainlit's way of answering). An empty ack (a client
    that acknowledges every event) answers nothing."""
    if not args or args[0] in (None, "", [], {}):
        return
    record = await database_sync_to_async(records.find_open_ask)(live.user, ask_id=ask_id)
    if record is None:
        raise AskRefused("no open ask with this id: it was answered, timed out or never asked")
    await _answer(live.user, record, args[0])


def _claim(record: Ask, user: User, value: Any) -> bool:
    return records.claim_answer(record.pk, user, value, live_askers=live_addresses())


async def _answer(user: User, record: Ask, raw: Any) -> None:
    value = await database_sync_to_async(_checked_answer)(user, record, raw)
    if not await database_sync_to_async(_claim)(record, user, value):
        if record.pk in {closed.pk for closed in await close_orphaned()}:
            raise AskRefused(ASKER_GONE)
        raise AskRefused("this ask is already answered or closed")
    waiters.wake(record.pk)
    await announce_cleared(record)


ASKER_GONE = "the server that asked this question stopped; the question is closed"


def _orphaned() -> list[Ask]:
    return records.close_orphaned_asks(
        live_askers=live_addresses(), unreachable_askers=unreachable_addresses()
    )


async def close_orphaned() -> list[Ask]:
    """Close the asks whose asking process died (nobody would take their answers) and clear
    them from every tab, with the reason; returns them (the recovery loop calls this)."""
    closed = await database_sync_to_async(_orphaned)()
    for record in closed:
        await announce_cleared(record, reason=ASKER_GONE)
    return closed


def _checked_answer(user: User, record: Ask, raw: Any) -> Any:
    """The answer as the hook receives it, or AskRefused saying what is wrong with it."""
    if record.kind == Ask.Kind.TEXT:
        text = raw.get("output") if isinstance(raw, dict) else raw
        if not isinstance(text, str) or not text.strip():
            raise AskRefused("a text ask takes {output: <non-empty text>}")
        try:
            answer = {"output": inputs.clean_text(text, "answer.output")}
        except inputs.InvalidInput as bad:
            raise AskRefused(str(bad)) from None
        drawn_as = _client_message_id(raw)
        return {**answer, "id": drawn_as} if drawn_as else answer
    if record.kind == Ask.Kind.ACTION:
        chosen = raw.get("id") if isinstance(raw, dict) else raw
        actions = (record.message.get("metadata") or {}).get("actions") or []
        for action in actions:
            if action.get("id") == chosen and chosen in record.spec.get("keys", []):
                return action
        raise AskRefused("an action ask takes one of its actions: {id: <one of spec.keys>}")
    return _checked_files(user, record, raw)


def _client_message_id(raw: Any) -> str | None:
    """The id under which the answering client drew the answer as the user's message (Chainlit's
    frontend answers a text ask with the StepDict it shows), if it is a UUID: the reply is then
    shown under it, so that client updates its copy instead of drawing a second."""
    chosen = raw.get("id") if isinstance(raw, dict) else None
    if not isinstance(chosen, str):
        return None
    try:
        return str(uuid.UUID(chosen))
    except ValueError:
        return None


def _checked_files(user: User, record: Ask, raw: Any) -> list[dict[str, Any]]:
    if not isinstance(raw, list) or not raw:
        raise AskRefused("a file ask takes a list of uploads: [{id: <upload id>}]")
    spec = record.spec
    if len(raw) > spec["max_files"]:
        raise AskRefused(f"at most {spec['max_files']} file(s)")
    ids = [_uuid(item.get("id") if isinstance(item, dict) else item, "file id") for item in raw]
    uploads = media_services.uploads_of(user, ids)
    if len(uploads) != len(set(ids)):
        raise AskRefused("no such upload of yours")
    files = []
    for upload in uploads:
        if upload.size > spec["max_size_mb"] * 1024 * 1024:
            raise AskRefused(f"{upload.name or 'a file'} is over {spec['max_size_mb']} MB")
        if not accepts(spec.get("accept"), upload.content_type, upload.name):
            raise AskRefused(
                f"{upload.name or 'a file'} ({upload.content_type}) is not a type this ask accepts"
            )
        files.append(
            {"id": str(upload.pk), "name": upload.name, "type": upload.content_type, "size": upload.size}
        )
    return files


def accepts(accept: Any, content_type: str, name: str) -> bool:
    """Chainlit's ``accept``: MIME types (``"image/*"`` allowed) or ``{mime: [".ext", ...]}``,
    matched against what the upload record says it is (or, for the dict, the name's extension)."""
    if not accept:
        return True
    kinds = list(accept) if isinstance(accept, (list, dict)) else [accept]
    content_type = (content_type or "").lower()
    for kind in kinds:
        kind = str(kind).lower()
        if kind in ("*", "*/*") or kind == content_type:
            return True
        if kind.endswith("/*") and content_type.startswith(kind[:-1]):
            return True
    if isinstance(accept, dict):
        suffixes = {str(s).lower() for exts in accept.values() for s in (exts or [])}
        return any((name or "").lower().endswith(s) for s in suffixes)
    return False


def file_spec(accept: Any, max_size_mb: int, max_files: int) -> dict[str, Any]:
    """The ``spec`` fields of a file ask, checked when the app asks (not when a user answers)."""
    if isinstance(accept, str):
        accept = [accept]
    if isinstance(accept, dict):
        accept = {str(k): [str(e) for e in (v or [])] for k, v in accept.items()}
    elif isinstance(accept, list):
        accept = [str(k) for k in accept]
    else:
        raise TypeError("accept must be a list of MIME types or a {mime: [extensions]} dict")
    return {
        "accept": accept,
        "max_size_mb": max(1, min(int(max_size_mb), MAX_SIZE_MB)),
        "max_files": max(1, min(int(max_files), MAX_FILES)),
    }


def read_files(user: User, files: list[dict[str, Any]]) -> dict[str, tuple[bytes, str | None]]:
    """The bytes and local path (None where there is none) of the uploads an answer named,
    by id (for ``chat.AskFileMessage``): a photo's bytes are in its row, another file's in
    the elements storage."""
    ids = [uuid.UUID(f["id"]) for f in files]
    return {
        str(upload.pk): (media_services.upload_bytes(upload), media_services.upload_path(upload))
        for upload in media_services.uploads_of(user, ids, with_data=True)
    }


def _uuid(value: Any, what: str) -> uuid.UUID:
    try:
        return uuid.UUID(str(value))
    except (TypeError, ValueError, AttributeError):
        raise AskRefused(f"{what} must be a UUID") from None
