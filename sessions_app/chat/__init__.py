"""The hooks API apps are written against: ``from sessions_app import chat``.

@chat.on_message
async def reply(message: chat.Message) -> None:
    await chat.Message(content=f"You said {message.content}").send()
"""

from sessions_app.chat.context import chat_context, current_session, user_session
from sessions_app.chat.elements import Element, File, Image, Pdf, Plotly, Text
from sessions_app.chat.feedback import Feedback
from sessions_app.chat.hooks import (
    on_chat_end,
    on_chat_resume,
    on_chat_start,
    on_feedback,
    on_message,
    on_settings_update,
    on_stop,
    set_chat_profiles,
    set_starters,
    use_engine_runtime,
)
from sessions_app.chat.message import Message
from sessions_app.chat.profiles import ChatProfile, Starter

__all__ = [
    "ChatProfile",
    "Element",
    "Feedback",
    "File",
    "Image",
    "Message",
    "Pdf",
    "Plotly",
    "Starter",
    "Text",
    "chat_context",
    "current_session",
    "on_chat_end",
    "on_chat_resume",
    "on_chat_start",
    "on_feedback",
    "on_message",
    "on_settings_update",
    "on_stop",
    "set_chat_profiles",
    "set_starters",
    "use_engine_runtime",
    "user_session",
]
