"""``chat.ChatSettings``: the settings panel an app declares, and its values.

    settings = await chat.ChatSettings([chat.Slider(id="temperature", label="Temperature",
                                                    initial=0.7, min=0, max=2, step=0.1)]).send()

``send()`` shows the panel (the ``chat_settings`` event) and returns the values, which hooks
also read as ``chat.user_session.get("chat_settings")``. Unlike Chainlit's, it keeps the values
the session already has where they are still valid, so an app that declares its settings again
in ``on_chat_resume`` does not undo what the user chose; new inputs start at their initial value.
The declaration is kept with the thread: changes are validated against it, and a reloaded page
or a resumed thread shows the panel before the app sends it again.
"""

from typing import Any

from django.conf import settings as django_settings

from sessions_app import chat_settings, inputs
from sessions_app.chat.context import require_session
from sessions_app.chat.input_widgets import InputWidget


class ChatSettings:
    def __init__(self, inputs: list[InputWidget]) -> None:
        ids = [widget.id for widget in inputs]
        if len(set(ids)) != len(ids):
            raise ValueError(f"ChatSettings: input ids must be unique, got {ids}")
        self.inputs = list(inputs)

    def settings(self) -> dict[str, Any]:
        """The initial values, by input id."""
        return {spec["id"]: spec["initial"] for spec in self._declared()}

    def _declared(self) -> list[dict[str, Any]]:
        return [widget.to_dict() for widget in self.inputs]

    async def send(self) -> dict[str, Any]:
        """Declare the panel for this session and its thread; returns the current values."""
        session = require_session()
        declared = self._declared()
        values = chat_settings.values_for(declared, session.chat_settings)
        inputs.clean_object(
            {"inputs": declared, "values": values},
            "ChatSettings",
            max_bytes=django_settings.CHAT_SETTINGS_MAX_BYTES,
        )
        session.chat_settings = values
        session.chat_settings_inputs = declared
        await session.emit("chat_settings", chat_settings.wire_payload(declared, values))
        await session.persist()
        return dict(values)
