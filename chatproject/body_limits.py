"""Request body budgets, enforced in the ASGI layer before Django reads a byte of the body.

Django's ASGI handler copies every request body into a temporary file before the view runs,
whatever its size; the parsers' caps come after that. This middleware answers ``413`` with a
JSON ``{"detail"}`` as soon as a body is known to be over its endpoint's budget: at once
when the ``Content-Length`` says so, else as the bytes arrive (a chunked or lying body is cut
off at the budget and Django is told the client left). A JSON body's shape (arrays and
objects, nesting: ``threads_app.json_shape``) is measured the same way, chunk by chunk, and
one over its budget is answered ``400`` at the chunk that shows it: 10 MB of ``[],`` costs
the server its first few kilobytes, not a copy to disk, a read back and a scan of all of it
with the GIL held, which kept every socket of the process waiting.

Budgets, by path (settings, read per request so tests can change them):

- ``/api/chat/send``: ``media_app.parsers.max_body_bytes()`` (photos travel inline as base64);
- ``/api/uploads/`` (and Chainlit's ``<CHAINLIT_PATH_PREFIX>/project/file``): one photo
  (``MAX_IMAGE_BYTES``) or other file (``UPLOAD_MAX_BYTES``), whichever is bigger, and its
  multipart envelope;
- ``/api/integrations/...``: ``INTEGRATION_MAX_BODY_BYTES``;
- ``/ws/socket.io/`` and its twin under the prefix (a long-polling POST of Engine.IO packets): ``SOCKETIO_MAX_PAYLOAD``,
  Engine.IO's ``maxHttpBufferSize``;
- everything else: ``MAX_REQUEST_BODY_BYTES``.
"""

import json
from collections.abc import Awaitable, Callable
from typing import Any

from django.conf import settings

from media_app import files, images, parsers
from media_app.api import MULTIPART_SLACK
from sessions_app.socket_paths import socket_paths
from threads_app import json_shape
from threads_app import parsers as json_parsers

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


def limit_for(path: str) -> int:
    """The largest body, in bytes, a request to ``path`` may carry."""
    if path == "/api/chat/send":
        return parsers.max_body_bytes()
    if path in ("/api/uploads/", f"{settings.CHAINLIT_PATH_PREFIX.rstrip('/')}/project/file"):
        return max(images.max_image_bytes(), files.max_upload_bytes()) + MULTIPART_SLACK
    if path.startswith("/api/integrations/"):
        return int(settings.INTEGRATION_MAX_BODY_BYTES)
    if path in socket_paths():
        return int(settings.SOCKETIO_MAX_PAYLOAD)
    return int(settings.MAX_REQUEST_BODY_BYTES)


def _header(scope: Scope, wanted: bytes) -> bytes | None:
    for name, value in scope.get("headers", []):
        if name == wanted:
            return bytes(value)
    return None


def _declared_length(scope: Scope) -> int | None:
    value = _header(scope, b"content-length")
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _json_shape(scope: Scope) -> json_shape.JsonShape | None:
    """A shape measure for a body the API will parse as JSON, else None."""
    content_type = _header(scope, b"content-type") or b""
    if content_type.split(b";")[0].strip().lower() != b"application/json":
        return None
    return json_parsers.shape()


# What of a refused body is still read (and dropped) after the answer is sent and before it
# ends, at most. uvicorn closes the connection as an answer ends (``Connection: close``), and
# bytes left unread in the socket
# make the kernel reset it: nginx, still sending the body it buffered, then answers 502, not
# Tether's 413. (daphne read the whole body before the application ran.) nginx sends nothing
# past its own client_max_body_size, a little above each budget, so this covers all it sends.
DISCARD_AT_MOST = 16 * 1024 * 1024


async def _discard_rest(scope: Scope, receive: Receive, left: int | None) -> None:
    """Read the rest of a refused body (``left`` bytes, None if unknown) unless it is bigger
    than ``DISCARD_AT_MOST``, or the client waits for ``100 Continue`` (it sent none of it)."""
    if (left is not None and left > DISCARD_AT_MOST) or _header(scope, b"expect") is not None:
        return
    read = 0
    while read <= DISCARD_AT_MOST:
        message = await receive()
        if message["type"] != "http.request":
            return
        read += len(message.get("body", b""))
        if not message.get("more_body", False):
            return


def _too_big(limit: int) -> str:
    return f"The request body is over {images.human_size(limit)}, the limit of this endpoint."


async def _refuse(
    send: Send, status: int, detail: str, discard: Callable[[], Awaitable[None]] | None = None
) -> None:
    """Answer ``status`` with ``detail``; then, with ``discard``, read the rest of the body
    (``_discard_rest``) before the answer ends, so the connection closes cleanly."""
    body = json.dumps({"detail": detail}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": discard is not None})
    if discard is not None:
        await discard()
        await send({"type": "http.response.body", "body": b""})


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
            await _refuse(send, 413, _too_big(limit), lambda: _discard_rest(scope, receive, declared))
            return
        shape = _json_shape(scope)
        received = 0
        more_body = True
        refusal: tuple[int, str] | None = None

        async def measured_receive() -> Message:
            nonlocal received, more_body, refusal
            message = await receive()
            if message["type"] != "http.request" or refusal is not None:
                return message
            body = message.get("body", b"")
            more_body = message.get("more_body", False)
            received += len(body)
            if received > limit:
                refusal = (413, _too_big(limit))
            elif shape is not None:
                try:
                    shape.feed(body)
                except json_shape.ShapeError as exc:
                    refusal = (400, str(exc))
            if refusal is not None:
                # Django stops reading and answers nothing; the refusal follows below.
                return {"type": "http.disconnect"}
            return message

        await self.app(scope, measured_receive, send)
        if refusal is not None:
            left = None if declared is None else declared - received
            await _refuse(
                send, *refusal, (lambda: _discard_rest(scope, receive, left)) if more_body else None
            )
