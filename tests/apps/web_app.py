"""The default app (messages go to the echo engine runtime) plus a greeting when a chat starts,
for the web UI tests: a reconnect must not greet twice."""

from typing import Any

from sessions_app import chat

chat.use_engine_runtime()

GREETING = "Hello! I echo what you send."


@chat.on_chat_start
async def start() -> None:
    await chat.Message(GREETING).send()


@chat.on_chat_resume
async def resume(thread: dict[str, Any]) -> None:
    """The history is restored by Tether; the engine resumes on the next message."""
