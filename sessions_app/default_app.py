"""The default chat app: every message goes to the box's engine (the echo engine unless the
box names another), queued while a turn streams and answered in order.

The engine runtime (``sessions_app.runtime``) writes the transcript, streams the reply and
resumes the engine's own conversation when an old thread is reopened, so this app has
nothing else to do but offer the starters of the ``CHAT_STARTERS`` setting.
"""

from typing import Any

from django.conf import settings

from sessions_app import chat

chat.use_engine_runtime()


@chat.on_chat_resume
async def resume(thread: dict[str, Any]) -> None:
    """The history is restored by Tether; the engine resumes on the next message."""


@chat.set_starters
async def starters() -> list[chat.Starter]:
    """The deployment's starters (``CHAT_STARTERS``, checked when the settings load)."""
    return [
        chat.Starter(label=s["label"], message=s["message"], icon=s.get("icon") or None)
        for s in settings.CHAT_STARTERS
    ]
