"""Whether a chat lets its user edit a sent message (Tether's page and Chainlit's frontend
offer "Edit" where it does; ``lifecycle.edit_message`` answers the edit).

A hooks-API app can when it has ``on_message``, which answers the edited message. An
engine-runtime app can when the engine of the chat's box can forget what followed the message
(``engines.can_rewind``): the echo and OpenAI-compatible engines can, Claude Code, which keeps
its own session of the conversation, cannot.
"""

from django.contrib.auth.models import User

from sessions_app.chat.hooks import can_edit_messages, load_app
from sessions_app.runtime.engines import can_rewind
from threads_app.models import Thread
from threads_app.selectors import chat_engine


def can_edit_in(user: User, thread: Thread | None) -> bool:
    """For ``thread`` (None: the user's next new chat, which goes to the user's box)."""
    if not load_app().engine_runtime:
        return can_edit_messages()
    return can_rewind(chat_engine(user, thread))
