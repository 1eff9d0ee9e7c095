"""Cross-origin reads of Chainlit's paths, for the copilot widget on another site's page.

The copilot runs in a page of another origin and calls Chainlit's API and the socket's
long-polling under ``CHAINLIT_PATH_PREFIX`` with ``fetch`` / XHR and credentials. A browser
lets that page read the answers only with CORS headers naming its origin. They are given to
the origins the site already trusts for forms and sockets (``CSRF_TRUSTED_ORIGINS``, by
``sessions_app.origin``'s rule), never to ``*``: an origin outside the list gets no header, so
its page can read nothing (and its unsafe requests are refused by the Origin checks anyway).
Preflights (``OPTIONS`` with ``Access-Control-Request-Method``) are answered here, before the
budgets and Django. Everything outside the prefix is passed through untouched.
"""

from collections.abc import Awaitable, Callable
from typing import Any

from chainlit_frontend.build import root_path
from sessions_app.origin import HandshakeRequest, is_trusted_origin, own_origin

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

ALLOWED_METHODS = b"GET, POST, PUT, PATCH, DELETE, OPTIONS"
PREFLIGHT_MAX_AGE = b"600"


def _header(scope: Scope, name: bytes) -> bytes | None:
    return next((bytes(v) for k, v in scope.get("headers", []) if k == name), None)


def cross_origin(scope: Scope) -> bytes | None:
    """The request's Origin when it is another origin the site trusts, under the prefix."""
    if not str(scope.get("path", "")).startswith(root_path() + "/"):
        return None
    origin = _header(scope, b"origin")
    if origin is None:
        return None
    request = HandshakeRequest(scope)
    text = origin.decode("latin-1")
    if text == own_origin(request) or not is_trusted_origin(text, request):
        return None
    return origin


class ChainlitCors:
    """ASGI middleware: CORS headers for trusted other origins on Chainlit's paths."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        origin = cross_origin(scope) if scope["type"] == "http" else None
        if origin is None:
            await self.app(scope, receive, send)
            return
        allow = [
            (b"access-control-allow-origin", origin),
            (b"access-control-allow-credentials", b"true"),
            (b"vary", b"Origin"),
        ]
        if scope["method"] == "OPTIONS" and _header(scope, b"access-control-request-method"):
            requested = _header(scope, b"access-control-request-headers") or b""
            headers = [
                *allow,
                (b"access-control-allow-methods", ALLOWED_METHODS),
                (b"access-control-allow-headers", requested),
                (b"access-control-max-age", PREFLIGHT_MAX_AGE),
                (b"content-length", b"0"),
            ]
            await send({"type": "http.response.start", "status": 204, "headers": headers})
            await send({"type": "http.response.body", "body": b""})
            return

        async def send_with_cors(message: Message) -> None:
            if message["type"] == "http.response.start":
                kept = [
                    (k, v)
                    for k, v in message.get("headers", [])
                    if not k.lower().startswith(b"access-control-")
                ]
                message = {**message, "headers": [*kept, *allow]}
            await send(message)

        await self.app(scope, receive, send_with_cors)
