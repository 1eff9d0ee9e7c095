"""``chat.Action``: a button under a message; a click runs the app's ``@chat.action_callback``.

The fields are Chainlit's (``name, payload, label, tooltip, icon, forId, id``), so the dict a
callback or an ``AskActionMessage`` answer carries reads the same. A message keeps its actions
in its step's ``metadata["actions"]``, so they come back on resume, reload and in the history.
"""

import uuid
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from sessions_app.chat.context import require_session
from sessions_app.database import database_sync_to_async
from sessions_app.thread_bus import publish_on_thread
from threads_app import asks as ask_records

if TYPE_CHECKING:
    from sessions_app.chat.message import Message
    from sessions_app.live import LiveSession


@dataclass
class Action:
    name: str  # which ``@chat.action_callback`` a click runs
    payload: dict[str, Any] = field(default_factory=dict)
    label: str = ""
    tooltip: str = ""
    icon: str | None = None
    forId: str | None = None  # the message it belongs to (set when the message is sent)
    id: str = field(default_factory=lambda: str(uuid.uuid4()))

    def __post_init__(self) -> None:
        self._message: Message | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Action":
        return cls(
            name=str(data.get("name") or ""),
            payload=dict(data.get("payload") or {}),
            label=str(data.get("label") or ""),
            tooltip=str(data.get("tooltip") or ""),
            icon=data.get("icon"),
            forId=data.get("forId"),
            id=str(data.get("id") or uuid.uuid4()),
        )

    def attach(self, message: "Message") -> None:
        self.forId = str(message.id)
        self._message = message

    async def remove(self) -> None:
        """Take the button off its message, in the transcript and on every tab."""
        session = require_session()
        message = self._message
        if message is not None and any(a is self for a in message.actions):
            message.actions = [a for a in message.actions if a is not self]
            await message.update()
        elif not await _remove_stored(session, self):
            return
        await session.emit("remove_action", self.to_dict())
        if session.has_first_interaction:
            await publish_on_thread(
                session.thread_id, "remove_action", self.to_dict(), skip_session=session.id
            )


async def _remove_stored(session: "LiveSession", action: Action) -> bool:
    """Take an action the session holds no message of (a callback's) off its step and show
    the step without it; whether it was there."""
    try:
        step_id = uuid.UUID(str(action.forId))
    except ValueError:
        return False
    step = await database_sync_to_async(ask_records.remove_actions)(session.thread_id, step_id, {action.id})
    if step is None:
        return False
    await session.emit("update_message", step)  # every tab's, as all the session shows
    return True
