"""A local OpenAI-compatible chat-completions server (SSE streaming) and its fixture, for the
openai engine's tests and the admin's engine-change test: the real ``openai`` client talks to it
over HTTP."""

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

SLOW_TOKEN_DELAY = 0.05


def last_user_text(messages: list[dict[str, Any]]) -> str:
    content = next(m["content"] for m in reversed(messages) if m["role"] == "user")
    if isinstance(content, str):
        return content
    return " ".join(part["text"] for part in content if part["type"] == "text")


class FakeChatCompletions:
    """A local OpenAI-compatible server: POST /v1/chat/completions, streamed."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.authorizations: list[str | None] = []
        self.aborted = asyncio.Event()  # a client dropped a stream before its end
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.completions)
        self.runner = web.AppRunner(app, shutdown_timeout=1.0)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        host, port = self.runner.addresses[0][:2]
        self.url = f"http://{host}:{port}/v1"

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()

    def reply_tokens(self, body: dict[str, Any]) -> tuple[list[str], float]:
        text = last_user_text(body["messages"])
        words = text.split()
        if words and words[0] == "!slow":
            return [f" tok{i}" for i in range(int(words[1]))], SLOW_TOKEN_DELAY
        reply = f"You said: {text}".split(" ")
        return [word if i == 0 else " " + word for i, word in enumerate(reply)], 0.0

    async def completions(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(body)
        self.authorizations.append(request.headers.get("Authorization"))
        if "!500" in last_user_text(body["messages"]):
            error = {"message": "the model is on fire", "type": "server_error", "code": None}
            return web.json_response({"error": error}, status=500)
        tokens, delay = self.reply_tokens(body)
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        completion_id = f"chatcmpl-{uuid.uuid4().hex[:12]}"

        async def send(delta: dict[str, Any], finish_reason: str | None = None) -> None:
            chunk = {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": body["model"],
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
            }
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())

        try:
            await send({"role": "assistant", "content": ""})
            for token in tokens:
                if delay:
                    await asyncio.sleep(delay)
                await send({"content": token})
            await send({}, "stop")
            await response.write(b"data: [DONE]\n\n")
            await response.write_eof()
        except ConnectionResetError:
            self.aborted.set()
        return response


@pytest.fixture
async def fake() -> AsyncIterator[FakeChatCompletions]:
    server = FakeChatCompletions()
    await server.start()
    yield server
    await server.stop()
