"""A hooks-API app whose turns use steps: a decorated tool step with a streamed step nested
inside it, then a step that fails (caught by the app), then the reply. ``on_chat_resume``
reports what the rebuilt chat context holds, so a test can see it."""

import asyncio
import contextlib
import os
from typing import Any

from sessions_app import chat

# How long each streamed token waits (``STEPS_APP_PAUSE`` seconds): a browser test slows it
# down to see a step running.
TOKEN_PAUSE = float(os.environ.get("STEPS_APP_PAUSE", "0.02"))


@chat.step(type="tool")
async def search(query: str, limit: int = 3) -> dict[str, Any]:
    async with chat.Step(name="fetch", type="retrieval") as fetch:
        fetch.input = {"url": f"https://example.invalid/?q={query}"}
        for word in ("first ", "second ", "third"):
            await fetch.stream_token(word)
            await asyncio.sleep(TOKEN_PAUSE)
    return {"query": query, "hits": limit}


@chat.step(name="calculator", type="tool")
async def divide(a: int, b: int) -> float:
    return a / b


@chat.on_message
async def answer(message: chat.Message) -> None:
    if message.content == "wait":  # a step that runs until the user stops it
        async with chat.Step(name="sleeper", type="tool") as sleeper:
            await sleeper.stream_token("started")
            await asyncio.sleep(60)
    found = await search(message.content)
    with contextlib.suppress(ZeroDivisionError):  # the step shows the error; the turn goes on
        await divide(1, 0)
    await chat.Message(f"found {found['hits']} for {message.content}").send()


if os.environ.get("STEPS_APP_WARMUP"):  # a step before the thread exists (kept until it does)

    @chat.on_chat_start
    async def start() -> None:
        async with chat.Step(name="warm-up", type="run") as warm_up:
            warm_up.input = {"ready": True}
            warm_up.output = "warm"


@chat.on_chat_resume
async def resume(thread: dict[str, Any]) -> None:
    entries = chat.chat_context.get()
    kinds = ",".join(entry.type for entry in entries)
    roles = ",".join(m["role"] for m in chat.chat_context.to_openai())
    await chat.Message(f"context: {kinds} | openai: {roles}").send()
