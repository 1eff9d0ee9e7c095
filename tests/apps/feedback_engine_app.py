"""An engine-runtime app (messages go to the box's engine) with an ``on_feedback`` hook that
records."""

from typing import Any

from sessions_app import chat
from tests.apps.feedback_recorder import record

chat.use_engine_runtime()
chat.on_feedback(record)


@chat.on_chat_resume
async def resume(thread: dict[str, Any]) -> None:
    """Reopened threads resume (Tether restores the history)."""
