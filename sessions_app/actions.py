"""Clicks on action buttons (``action_call``) and taking buttons off a message.

A click names the action by its id and its message (``forId``); the action must still be on
a message of the clicking session's chat (its thread, or the steps it keeps before the thread
exists), else the click is refused as not found: another user's ids, removed buttons and
made-up ones look the same. The callback then runs as a hook of that session, so it never
overlaps the session's turns, and once per ``action_call``.
"""

import uuid
from typing import Any

from sessions_app.chat.actions import Action
from sessions_app.chat.hooks import load_app
from sessions_app.database import database_sync_to_async
from sessions_app.lifecycle import first_interaction
from sessions_app.live import LiveSession
from sessions_app.models import SocketSession
from threads_app import asks as ask_records

NOT_FOUND = "no such action on a message of this chat"


class ActionRefused(Exception):
    """The click cannot run; the message goes back to the client."""


def _uuid(value: Any, what: str) -> uuid.UUID:
    try:
        return uuid.UUID(str(value))
    except (TypeError, ValueError, AttributeError):
        raise ActionRefused(f"{what} must be a UUID") from None


def _deferred_action(live: LiveSession, step_id: uuid.UUID, action_id: str) -> dict[str, Any] | None:
    """The action on a message the session sent before its thread existed."""
    steps = (
        SocketSession.objects.filter(pk=live.id, user=live.user)
        .values_list("deferred_steps", flat=True)
        .first()
    )
    for step in steps or []:
        if step.get("id") == str(step_id):
            for action in (step.get("metadata") or {}).get("actions") or []:
                if action.get("id") == action_id:
                    return dict(action)
    return None


async def find(live: LiveSession, payload: Any) -> dict[str, Any]:
    """The stored action an ``action_call`` names: ``{action: {id, forId, ...}}`` (Chainlit's
    ``POST /project/action`` body) or the action dict itself."""
    if not isinstance(payload, dict):
        raise ActionRefused("action_call needs {action: {id, forId}}")
    named = payload.get("action", payload)
    if not isinstance(named, dict):
        raise ActionRefused("action_call needs {action: {id, forId}}")
    action_id = str(_uuid(named.get("id"), "action.id"))
    step_id = _uuid(named.get("forId"), "action.forId")
    if live.has_first_interaction:
        found = await database_sync_to_async(ask_records.find_action)(
            live.user, live.thread_id, step_id, action_id
        )
    else:
        found = await database_sync_to_async(_deferred_action)(live, step_id, action_id)
    if found is None:
        raise ActionRefused(NOT_FOUND)
    return found


async def call(live: LiveSession, payload: Any) -> dict[str, Any]:
    """Run the app's callback for a click; answered once the callback is queued."""
    stored = await find(live, payload)
    callback = load_app().action_callbacks.get(stored.get("name") or "")
    if callback is None:
        raise ActionRefused(f"no callback for action {stored.get('name')!r}")
    if not live.has_first_interaction:  # as Chainlit does: the click starts the thread
        await first_interaction(live, stored.get("label") or stored.get("name") or "action")
    live.run_hook(callback, Action.from_dict(stored))
    return {"success": True, "id": stored["id"], "forId": stored.get("forId")}
