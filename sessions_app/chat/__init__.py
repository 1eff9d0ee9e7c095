"""The hooks API apps are written against: ``from sessions_app import chat``.

@chat.on_message
async def reply(message: chat.Message) -> None:
    await chat.Message(content=f"You said {message.content}").send()
"""

import importlib
from typing import TYPE_CHECKING, Any

from sessions_app.chat import types
from sessions_app.chat.actions import Action
from sessions_app.chat.asks import AskActionMessage, AskFile, AskFileMessage, AskUserMessage
from sessions_app.chat.cache import cache
from sessions_app.chat.chat_settings import ChatSettings
from sessions_app.chat.context import chat_context, current_session, user_session
from sessions_app.chat.elements import CustomElement, Element, File, Image, Pdf, Plotly, Text
from sessions_app.chat.feedback import Feedback
from sessions_app.chat.hook_context import context
from sessions_app.chat.hooks import (
    action_callback,
    header_auth_callback,
    oauth_callback,
    on_chat_end,
    on_chat_resume,
    on_chat_start,
    on_feedback,
    on_message,
    on_settings_update,
    on_stop,
    on_window_message,
    password_auth_callback,
    set_chat_profiles,
    set_starters,
    use_engine_runtime,
)
from sessions_app.chat.input_widgets import (
    Checkbox,
    InputWidget,
    MultiSelect,
    NumberInput,
    Select,
    Slider,
    Switch,
    Tags,
    TextInput,
)
from sessions_app.chat.instrumentation import instrument_openai
from sessions_app.chat.message import Message
from sessions_app.chat.profiles import ChatProfile, Starter
from sessions_app.chat.step import Step, step
from sessions_app.chat.sync import make_async, run_sync, sleep
from sessions_app.chat.user import User
from sessions_app.chat.window_messages import send_window_message

if TYPE_CHECKING:
    from sessions_app.chat.langchain import AsyncLangchainCallbackHandler, LangchainCallbackHandler

# Names whose module needs an optional package: imported on first use, so an app that does not
# use them (and a server without the package) never loads it.
_OPTIONAL = {
    "AsyncLangchainCallbackHandler": "sessions_app.chat.langchain",
    "LangchainCallbackHandler": "sessions_app.chat.langchain",
}


def __getattr__(name: str) -> Any:
    """``chat.LangchainCallbackHandler`` and the like, imported when first asked for."""
    if name not in _OPTIONAL:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_OPTIONAL[name]), name)
    globals()[name] = value
    return value


__all__ = [
    "Action",
    "AskActionMessage",
    "AskFile",
    "AskFileMessage",
    "AskUserMessage",
    "AsyncLangchainCallbackHandler",
    "ChatProfile",
    "ChatSettings",
    "Checkbox",
    "CustomElement",
    "Element",
    "Feedback",
    "File",
    "Image",
    "InputWidget",
    "LangchainCallbackHandler",
    "Message",
    "MultiSelect",
    "NumberInput",
    "Pdf",
    "Plotly",
    "Select",
    "Slider",
    "Starter",
    "Step",
    "Switch",
    "Tags",
    "Text",
    "TextInput",
    "User",
    "action_callback",
    "cache",
    "chat_context",
    "context",
    "current_session",
    "header_auth_callback",
    "instrument_openai",
    "make_async",
    "oauth_callback",
    "on_chat_end",
    "on_chat_resume",
    "on_chat_start",
    "on_feedback",
    "on_message",
    "on_settings_update",
    "on_stop",
    "on_window_message",
    "password_auth_callback",
    "run_sync",
    "send_window_message",
    "set_chat_profiles",
    "set_starters",
    "sleep",
    "step",
    "types",
    "use_engine_runtime",
    "user_session",
]
