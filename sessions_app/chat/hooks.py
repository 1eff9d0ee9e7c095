"""The hook registry an app fills with ``@chat.on_chat_start`` and friends.

The app module named by the ``CHAT_APP`` setting is imported once per process
(``load_app``); its decorators register into ``registry``.
"""

import importlib
import sys
import threading
from collections.abc import Awaitable, Callable
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from django.conf import settings

Hook = Callable[..., Awaitable[Any]]


@dataclass
class Hooks:
    on_chat_start: Hook | None = None
    on_chat_resume: Hook | None = None
    on_message: Hook | None = None
    on_chat_end: Hook | None = None
    on_stop: Hook | None = None
    on_settings_update: Hook | None = None
    # Called with a ``chat.Feedback`` when a user gives or changes feedback on a message
    # (``sessions_app.feedback``); it runs outside any chat session.
    on_feedback: Hook | None = None
    # What an empty chat offers (sessions_app.app_settings): starters and chat profiles.
    set_starters: Hook | None = None
    set_chat_profiles: Hook | None = None
    # Messages go to the box's engine runtime (queue, drain, transcript) instead of on_message.
    engine_runtime: bool = False
    # ``@chat.action_callback(name)``: what a click on an action button of that name runs.
    action_callbacks: dict[str, Hook] = field(default_factory=dict)

    def clear(self) -> None:
        for each in fields(self):
            default = each.default_factory() if each.default is MISSING else each.default  # type: ignore[misc]
            setattr(self, each.name, default)


registry = Hooks()
_load_lock = threading.Lock()
_loaded_app: str | None = None


def load_app(dotted_path: str | None = None) -> Hooks:
    """Import the chat app once per process (thread-safe) and return the filled registry."""
    global _loaded_app
    path = dotted_path or settings.CHAT_APP
    with _load_lock:
        if _loaded_app != path:
            registry.clear()
            if path in sys.modules:
                importlib.reload(sys.modules[path])
            else:
                importlib.import_module(path)
            _loaded_app = path
    return registry


def _register(name: str) -> Callable[[Hook], Hook]:
    def decorator(func: Hook) -> Hook:
        setattr(registry, name, func)
        return func

    return decorator


on_chat_start = _register("on_chat_start")
on_chat_resume = _register("on_chat_resume")
on_message = _register("on_message")
on_chat_end = _register("on_chat_end")
on_stop = _register("on_stop")
on_settings_update = _register("on_settings_update")
on_feedback = _register("on_feedback")
# ``async def f(user) -> list[chat.Starter]`` / ``list[chat.ChatProfile]`` (the user optional).
set_starters = _register("set_starters")
set_chat_profiles = _register("set_chat_profiles")


def action_callback(name: str) -> Callable[[Hook], Hook]:
    """``@chat.action_callback("name")``: run ``async def f(action)`` when an action button of
    that name is clicked (in the clicking tab's session, serialised with its turns)."""

    def decorator(func: Hook) -> Hook:
        registry.action_callbacks[name] = func
        return func

    return decorator


def use_engine_runtime() -> None:
    """Hand user messages to the box's engine (``sessions_app.runtime``) instead of on_message."""
    registry.engine_runtime = True
