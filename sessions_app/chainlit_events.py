"""Events Chainlit's frontend emits for features Tether does not have (favorites, audio,
settings edited as they are typed): answered the way Chainlit answers them when the feature is
off, never with an ``error``. (``window_message`` runs the app's ``on_window_message``, if any:
``sessions_app.chat.window_messages``.)

Chainlit's ``socket.py`` handles each of them and, with the feature disabled, does nothing,
except ``fetch_favorites`` (emitted on every connect), which a Chainlit server with a data
layer answers with the user's favorite steps: Tether keeps none, so the list is empty.
"""

from typing import Any

from sessions_app.live import LiveSession


async def fetch_favorites(live: LiveSession, _payload: Any) -> None:
    """The user's favorite messages (``set_favorites``): none, Tether has no favorites."""
    await live.emit("set_favorites", [])


async def ignore(_live: LiveSession, _payload: Any) -> None:
    """What Chainlit does with the event when its feature is off: nothing."""


# Event -> its handler; what they do not read (an audio chunk) is dropped.
UNSERVED_EVENTS = {
    "fetch_favorites": fetch_favorites,
    "message_favorite": ignore,
    "audio_start": ignore,
    "audio_chunk": ignore,
    "audio_end": ignore,
    "chat_settings_edit": ignore,
}
