"""``chat.Action``: a button under a message; a click runs the app's ``@chat.action_callback``.

The fields are Chainlit's (``name, payload, label, tooltip, icon, forId, id``), so the dict a
callback or an ``AskActionMessage`` answer carries reads the same. A message keeps its actions
in its step's ``metadata["actions"]``, so they come back on resume, reload and in the history.
"""

import uuid
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from sessions_app.chat.context import require_session

if TYPE_CHECKING:
    from sessions_app.chat.message import Message


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
        from sessions_app import actions  # the live layer imports this package

        session = require_session()
        message = self._message
        if message is not None and any(a is self for a in message.actions):
            message.actions = [a for a in message.actions if a is not self]
            await message.update()
            await actions.announce_removed(session, self)
            return
        await actions.remove_stored(session, self)
