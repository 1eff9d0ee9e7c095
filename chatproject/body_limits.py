"""Request body budgets, enforced in the ASGI layer before Django reads a byte of the body.

Django's ASGI handler copies every request body into a temporary file before the view runs,
whatever its size; the parsers' caps come after that. This middleware answers ``413`` with a
JSON ``{"detail"}`` as soon as a body is known to be over its endpoint's budget: at once
when the ``Content-Length`` says so, else as the bytes arrive (a chunked or lying body is cut
off at the budget and Django is told the client left).

Budgets, by path (settings, read per request so tests can change them):

- ``/api/chat/send``: ``media_app.parsers.max_body_bytes()`` (photos travel inline as base64);
- ``/api/uploads/``: one photo (``MAX_IMAGE_BYTES``) and its multipart envelope;
- ``/api/integrations/...``: ``INTEGRATION_MAX_BODY_BYTES``;
- everything else: ``MAX_REQUEST_BODY_BYTES``.
"""

import json
from collections.abc import Awaitable, Callable
from typing import Any

from django.conf import settings

from media_app import images, parsers
from media_app.api import MULTIPART_SLACK

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


def limit_for(path: str) -> int:
    """The largest body, in bytes, a request to ``path`` may carry."""
    if path == "/api/chat/send":
        return parsers.max_body_bytes()
    if path == "/api/uploads/":
        return images.max_image_bytes() + MULTIPART_SLACK
    if path.startswith("/api/integrations/"):
        return int(settings.INTEGRATION_MAX_BODY_BYTES)
    return int(settings.MAX_REQUEST_BODY_BYTES)


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _refuse(send: Send, limit: int) -> None:
    body = json.dumps(
        {"detail": f"The request body is over {images.human_size(limit)}, the limit of this endpoint."}
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class BodyLimitMiddleware:
    """ASGI middleware for the HTTP app: refuses bodies over their endpoint's budget."""

    def __init__(self, app: Callable[..., Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = limit_for(scope.get("path", ""))
        declared = _declared_length(scope)
        if declared is not None and declared > limit:
            await _refuse(send, limit)
            return
        received = 0
        over = False

        async def counted_receive() -> Message:
            nonlocal received, over
            message = await receive()
            if message["type"] == "http.request" and not over:
                received += len(message.get("body", b""))
                if received > limit:
                    over = True
                    # Django stops reading and answers nothing; the refusal follows below.
                    return {"type": "http.disconnect"}
            return message

        await self.app(scope, counted_receive, send)
        if over:
            await _refuse(send, limit)
