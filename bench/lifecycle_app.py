"""The chat app served during ``bench/lifecycle.py``: one message per lifecycle hook.

``on_chat_start`` says "ready" and ``on_chat_resume`` says "resumed", so the benchmark can
time the moment a hook's first message reaches the client.
"""

from typing import Any

from sessions_app import chat

READY = "ready"
RESUMED = "resumed"


@chat.on_chat_start
async def start() -> None:
    await chat.Message(READY).send()


@chat.on_chat_resume
async def resume(thread: dict[str, Any]) -> None:
    await chat.Message(RESUMED).send()
