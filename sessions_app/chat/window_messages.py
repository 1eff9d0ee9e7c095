"""Chainlit's window messages: ``@chat.on_window_message`` runs for each ``window_message``
event a client sends (in Chainlit's page: what the window embedding it posted), and
``chat.send_window_message(data)`` sends one to the session's tabs.

A window message runs like an action click (``LiveSession.run_click``): in the session that
got it, never overlapping its turns (so after a running ``on_message``), at most
``MAX_WAITING_CLICKS`` waiting, each from the clicks budget; a socket frame of it holds at most
4 KB, as any small event's.
"""

from typing import Any

from sessions_app.chat.context import require_session
from sessions_app.chat.hooks import load_app
from sessions_app.live import LiveSession, TooManyWaiting

TOO_MANY_WAITING = (
    "too many window messages of this chat are waiting for their turn; send again once they ran"
)


async def send_window_message(data: Any) -> None:
    """Send ``data`` (JSON) to the current session's tabs as a ``window_message`` event."""
    await require_session().emit("window_message", data)


async def received(live: LiveSession, payload: Any) -> None:
    """A client's ``window_message``: queue the app's hook with its data (nothing without one)."""
    from sessions_app.lifecycle import BadRequest  # it imports the hooks API

    hook = load_app().on_window_message
    if hook is None:
        return
    try:
        live.run_click(hook, payload)
    except TooManyWaiting:
        raise BadRequest(TOO_MANY_WAITING) from None
