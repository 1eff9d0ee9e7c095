"""The default chat app: echoes each message back, streamed token by token.

It stands in until the engine runtime answers through the box's engine.
"""

import asyncio

from sessions_app import chat


@chat.on_message
async def echo(message: chat.Message) -> None:
    reply = chat.Message()
    for token in _tokens(f"Echo: {message.content}"):
        await reply.stream_token(token)
        await asyncio.sleep(0)
    await reply.send()


@chat.on_chat_resume
async def resume(thread: dict) -> None:
    """Nothing to rebuild: the history is restored by Tether itself."""


def _tokens(text: str) -> list[str]:
    words = text.split(" ")
    return [word if i == 0 else " " + word for i, word in enumerate(words)]
