"""What the owner of a thread's (or a box's integration) sessions serves for other processes:
the mailbox request types and the functions that answer them (the same functions ``routing``
calls directly when this process is the owner)."""

from sessions_app.runtime import chats, integration_turns
from sessions_app.runtime.routing import Handler

OWNER_HANDLERS: dict[str, Handler] = {
    "runtime.submit": chats.submit_here,
    "runtime.watch": chats.watch_here,
    "runtime.stop": chats.stop_here,
    "runtime.forget": chats.forget_here,
    "runtime.edit": chats.edit_here,
    "runtime.integration": integration_turns.accept_here,
}
