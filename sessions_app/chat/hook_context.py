"""``chat.context``: Chainlit's ``cl.context``, what a running hook reads of where it runs.

``chat.context.session`` (``id``, ``thread_id``, ``user``, ``chat_profile``, ...),
``chat.context.current_step`` (the innermost ``chat.Step`` open here, or None) and
``chat.context.emitter`` (events to this session's sockets). Every read looks at the current
session (``current_session``), so the one object serves every hook and task; outside a hook
it raises, as Chainlit's does.
"""

import asyncio
from typing import TYPE_CHECKING, Any

from sessions_app.chat.context import require_session
from sessions_app.chat.step import Step, current_step
from sessions_app.chat.sync import hook_loop
from sessions_app.chat.user import User

if TYPE_CHECKING:
    from sessions_app.live import LiveSession


class SessionView:
    """``chat.context.session``: the fields of the session a Chainlit app reads."""

    def __init__(self, live: "LiveSession") -> None:
        self._live = live

    @property
    def id(self) -> str:
        return str(self._live.id)

    @property
    def thread_id(self) -> str:
        return str(self._live.thread_id)

    @property
    def user(self) -> User:
        return User.of(self._live.user)

    @property
    def chat_profile(self) -> str | None:
        return self._live.chat_profile or None

    @property
    def chat_settings(self) -> dict[str, Any]:
        return self._live.chat_settings

    @property
    def client_type(self) -> str:
        return self._live.client_type

    @property
    def has_first_interaction(self) -> bool:
        return self._live.has_first_interaction


class SessionEmitter:
    """``chat.context.emitter``: Chainlit's emitter calls apps make, sent to this session's
    sockets (every tab of the session, with the session's event offsets)."""

    def __init__(self, live: "LiveSession") -> None:
        self._live = live

    async def emit(self, event: str, data: Any) -> None:
        """Any event, as Chainlit's ``emitter.emit``: the client needs a handler for it."""
        await self._live.emit(event, data)

    async def task_start(self) -> None:
        await self._live.emit("task_start", None)

    async def task_end(self) -> None:
        await self._live.emit("task_end", None)

    async def send_toast(self, message: str, type: str = "info") -> None:
        await self._live.emit("toast", {"message": message, "type": type})

    async def send_window_message(self, data: Any) -> None:
        """Chainlit's ``window_message``: the page posts ``data`` to the window embedding it."""
        await self._live.emit("window_message", data)


class HookContext:
    """The ``chat.context`` object."""

    @property
    def session(self) -> SessionView:
        return SessionView(require_session())

    @property
    def emitter(self) -> SessionEmitter:
        return SessionEmitter(require_session())

    @property
    def current_step(self) -> Step | None:
        require_session()
        return current_step()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The event loop the hooks run on (in an app thread too)."""
        return hook_loop()


context = HookContext()
