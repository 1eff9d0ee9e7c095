"""A hooks-API app (its ``on_message`` answers) with an ``on_feedback`` hook that records."""

from typing import Any

from sessions_app import chat
from tests.apps.feedback_recorder import record

chat.on_feedback(record)


@chat.on_message
async def answer(message: chat.Message) -> None:
    await chat.Message(f"echo: {message.content}").send()


@chat.on_chat_resume
async def resume(thread: dict[str, Any]) -> None:
    """Reopened threads resume (Tether restores the history)."""
