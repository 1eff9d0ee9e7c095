"""Clicks on action buttons (``action_call``) and taking buttons off a message.

A click names the action by its id and its message (``forId``); the action must still be on
a message of the clicking session's chat (its thread, or the steps it keeps before the thread
exists), else the click is refused as not found: another user's ids, removed buttons and
made-up ones look the same. The callback then runs as a hook of that session, so it never
overlaps the session's turns, and once per ``action_call``.
"""

import uuid
from typing import Any

from django.contrib.auth.models import User

from sessions_app.chat.actions import Action
from sessions_app.chat.hooks import load_app
from sessions_app.database import database_sync_to_async
from sessions_app.lifecycle import first_interaction
from sessions_app.live import MAX_WAITING_CLICKS, LiveSession, TooManyWaiting
from sessions_app.models import SocketSession
from threads_app import asks as ask_records

NOT_FOUND = "no such action on a message of this chat"
TOO_MANY_WAITING = (
    f"{MAX_WAITING_CLICKS} clicks of this chat are waiting for their turn; click again once they ran"
)


class ActionRefused(Exception):
    """The click cannot run; the message goes back to the client."""


def _uuid(value: Any, what: str) -> uuid.UUID:
    try:
        return uuid.UUID(str(value))
    except (TypeError, ValueError, AttributeError):
        raise ActionRefused(f"{what} must be a UUID") from None


def _on_step(steps: list[dict[str, Any]], step_id: uuid.UUID, action_id: str) -> dict[str, Any] | None:
    for step in steps:
        if step.get("id") == str(step_id):
            for action in (step.get("metadata") or {}).get("actions") or []:
                if action.get("id") == action_id:
                    return dict(action)
    return None


def parse(payload: Any) -> tuple[uuid.UUID, str]:
    """``(step id, action id)`` of a click: ``{action: {id, forId, ...}}`` (the body of
    Chainlit's ``POST /project/action``) or the action dict itself."""
    named = payload.get("action", payload) if isinstance(payload, dict) else None
    if not isinstance(named, dict):
        raise ActionRefused("action_call needs {action: {id, forId}}")
    action_id = str(_uuid(named.get("id"), "action.id"))
    return _uuid(named.get("forId"), "action.forId"), action_id


def lookup(user: User, session_id: uuid.UUID, payload: Any) -> tuple[dict[str, Any], str]:
    """The stored action a click names, on a message of the user's live session (its thread,
    or the steps it keeps before the thread exists), and the channel of the session's socket
    (blank when none holds it). Anything else is ActionRefused(NOT_FOUND)."""
    step_id, action_id = parse(payload)
    record = (
        SocketSession.objects.filter(pk=session_id, user=user, ended=False)
        .only("thread_id", "has_first_interaction", "deferred_steps", "socket_channel")
        .first()
    )
    found = None
    if record is not None and record.has_first_interaction:
        found = ask_records.find_action(user, record.thread_id, step_id, action_id)
    elif record is not None:
        found = _on_step(record.deferred_steps or [], step_id, action_id)
    if record is None or found is None:
        raise ActionRefused(NOT_FOUND)
    return found, record.socket_channel


async def call(live: LiveSession, payload: Any) -> dict[str, Any]:
    """Run the app's callback for a click; answered once the callback is queued. The click
    budget was spent by whoever received the click (the socket or the HTTP view); a session
    with ``MAX_WAITING_CLICKS`` callbacks waiting refuses more before reading anything."""
    if live.clicks_full():
        raise ActionRefused(TOO_MANY_WAITING)
    stored, _channel = await database_sync_to_async(lookup)(live.user, live.id, payload)
    callback = load_app().action_callbacks.get(stored.get("name") or "")
    if callback is None:
        raise ActionRefused(f"no callback for action {stored.get('name')!r}")
    if not live.has_first_interaction:  # as Chainlit does: the click starts the thread
        await first_interaction(live, stored.get("label") or stored.get("name") or "action")
    try:
        live.run_click(callback, Action.from_dict(stored))
    except TooManyWaiting:
        raise ActionRefused(TOO_MANY_WAITING) from None
    return {"success": True, "id": stored["id"], "forId": stored.get("forId")}
