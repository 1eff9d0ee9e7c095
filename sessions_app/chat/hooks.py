"""The hook registry an app fills with ``@chat.on_chat_start`` and friends.

The app module named by the ``CHAT_APP`` setting is imported once per process
(``load_app``); its decorators register into ``registry``.
"""

import importlib
import logging
import sys
import threading
from collections.abc import Awaitable, Callable
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, TypeVar

from django.conf import settings

from sessions_app.chat.sync import as_hook

Hook = Callable[..., Awaitable[Any]]
# What an app decorates: an ``async def`` or a plain ``def`` (Chainlit takes both).
AppFunction = TypeVar("AppFunction", bound=Callable[..., Any])


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
    # Sign-in (``sessions_app.app_auth``): ``(username, password) -> chat.User | None`` on the
    # login page, ``(headers) -> chat.User | None`` on any request of a signed-out browser.
    password_auth_callback: Hook | None = None
    header_auth_callback: Hook | None = None
    # Registered for Chainlit apps, never called: Tether has no OAuth provider flow.
    oauth_callback: Hook | None = None
    # ``(data)``: a client's ``window_message`` (``sessions_app.chat.window_messages``).
    on_window_message: Hook | None = None
    # Messages go to the box's engine runtime (queue, drain, transcript) instead of on_message.
    engine_runtime: bool = False
    # ``@chat.action_callback(name)``: what a click on an action button of that name runs.
    action_callbacks: dict[str, Hook] = field(default_factory=dict)

    def clear(self) -> None:
        for each in fields(self):
            default = each.default_factory() if each.default is MISSING else each.default  # type: ignore[misc]
            setattr(self, each.name, default)


logger = logging.getLogger(__name__)
registry = Hooks()
_load_lock = threading.Lock()
_loaded_app: str | None = None


class AppImportError(ImportError):
    """The module ``CHAT_APP`` names failed to import (the cause is chained)."""


def load_app(dotted_path: str | None = None) -> Hooks:
    """Import the chat app once per process (thread-safe) and return the filled registry.
    The server calls it as it starts (``chatproject.asgi``), so an app that cannot be imported
    stops the start with its traceback instead of failing every socket later."""
    global _loaded_app
    path = dotted_path or settings.CHAT_APP
    with _load_lock:
        if _loaded_app != path:
            registry.clear()
            try:
                if path in sys.modules:
                    importlib.reload(sys.modules[path])
                else:
                    importlib.import_module(path)
            except Exception as exc:
                registry.clear()  # what the module registered before it failed is not an app
                raise AppImportError(
                    f"the chat app CHAT_APP={path!r} could not be imported: {exc!r}"
                ) from exc
            _loaded_app = path
    return registry


def can_edit_messages() -> bool:
    """Whether a hooks-API app's chats take ``edit_message``: it has ``on_message``, which
    answers the edited message (an engine-runtime app's depend on its box's engine:
    ``sessions_app.editing``)."""
    hooks = load_app()
    return not hooks.engine_runtime and hooks.on_message is not None


def _register(name: str, arguments: int | None) -> Callable[[AppFunction], AppFunction]:
    """The decorator that registers the app's hook ``name``, which Tether calls with
    ``arguments`` positional arguments (None: its caller fits them to the function). The
    function is registered as ``as_hook`` adapts it (a plain ``def`` runs on an app thread) and
    returned unchanged, as Chainlit's decorators do."""

    def decorator(func: AppFunction) -> AppFunction:
        setattr(registry, name, as_hook(func, arguments))
        return func

    return decorator


on_chat_start = _register("on_chat_start", 0)
on_chat_resume = _register("on_chat_resume", 1)  # the thread
on_message = _register("on_message", 1)  # the message
on_chat_end = _register("on_chat_end", 0)
on_stop = _register("on_stop", 0)
on_settings_update = _register("on_settings_update", 1)  # the settings
on_feedback = _register("on_feedback", 1)  # the feedback
# ``async def f(user) -> list[chat.Starter]`` / ``list[chat.ChatProfile]`` (the user optional).
set_starters = _register("set_starters", None)
set_chat_profiles = _register("set_chat_profiles", None)
password_auth_callback = _register("password_auth_callback", 2)  # username, password
header_auth_callback = _register("header_auth_callback", 1)  # the request's headers
on_window_message = _register("on_window_message", 1)  # the data the client sent


def oauth_callback(func: AppFunction) -> AppFunction:
    """``@chat.oauth_callback``: accepted so that a Chainlit app imports, but never called, since
    Tether signs users in with its own login page (or ``password_auth_callback`` /
    ``header_auth_callback``), not through OAuth providers. Logged once when registered."""
    logger.warning(
        "%s is registered as oauth_callback, but Tether has no OAuth sign-in: it is never called "
        "(sign users in with password_auth_callback or header_auth_callback)",
        getattr(func, "__qualname__", func),
    )
    registry.oauth_callback = as_hook(func, 5)
    return func


def action_callback(name: str) -> Callable[[AppFunction], AppFunction]:
    """``@chat.action_callback("name")``: run ``async def f(action)`` when an action button of
    that name is clicked (in the clicking tab's session, serialised with its turns)."""

    def decorator(func: AppFunction) -> AppFunction:
        registry.action_callbacks[name] = as_hook(func, 1)
        return func

    return decorator


def use_engine_runtime() -> None:
    """Hand user messages to the box's engine (``sessions_app.runtime``) instead of on_message."""
    registry.engine_runtime = True
