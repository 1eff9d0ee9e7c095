"""The Origin of a WebSocket handshake, checked as Django's CSRF check checks a form's.

A browser sends the site's cookies with a WebSocket handshake from any page of the same
*site*: a page on another port of the host, or on its ``http://`` twin, is same-site, so a
Lax session cookie goes with it and the socket would be the signed-in user's. The handshake
is therefore accepted only from an origin that is ours, by ``CsrfViewMiddleware``'s rule for
an unsafe request: the request's own ``scheme://host[:port]`` (``HttpRequest.is_secure`` and
``get_host``, so ``SECURE_PROXY_SSL_HEADER``, ``USE_X_FORWARDED_HOST`` and ``ALLOWED_HOSTS``
apply as on every page), or one of ``CSRF_TRUSTED_ORIGINS`` (exact, or ``https://*.example.com``
for the subdomains of a host). One list serves both checks.

Channels' ``OriginValidator`` fed with ``ALLOWED_HOSTS`` compared host names alone (its
scheme-less patterns match any scheme and port), which is why this module replaces it.

A handshake without Origin comes from no browser (a browser always sends one on a WebSocket),
so nothing ambient rides on it: it goes on, and its credentials are checked as usual.
``Origin: null`` (a sandboxed frame, a ``file:`` page) is refused like any foreign origin.
"""

import io
import logging
from typing import Any
from urllib.parse import urlsplit

from asgiref.typing import ASGIReceiveCallable, ASGISendCallable
from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest
from django.utils.http import is_same_domain

logger = logging.getLogger(__name__)


class HandshakeRequest(ASGIRequest):
    """A WebSocket handshake (an HTTP GET) as a Django request, so its scheme and host are
    read exactly as Django reads a page's."""

    def __init__(self, scope: Any) -> None:
        super().__init__({**scope, "method": "GET"}, io.BytesIO())

    def _get_scheme(self) -> str:
        # A WebSocket scope says ws or wss; no scheme (as daphne sends it) means ws (ASGI spec).
        return "https" if self.scope.get("scheme") in ("wss", "https") else "http"


def own_origin(request: HttpRequest) -> str | None:
    """``scheme://host[:port]`` of the request itself; None when its Host is not allowed."""
    try:
        host = request.get_host()
    except DisallowedHost:
        return None
    return f"{'https' if request.is_secure() else 'http'}://{host}"


def is_trusted_origin(origin: str, request: HttpRequest) -> bool:
    """Is a browser's ``origin`` the request's own or one of ``CSRF_TRUSTED_ORIGINS``?"""
    if origin == own_origin(request):
        return True
    trusted = settings.CSRF_TRUSTED_ORIGINS
    if origin in (pattern for pattern in trusted if "*" not in pattern):
        return True
    try:
        parsed = urlsplit(origin)
    except ValueError:
        return False
    wildcards = (urlsplit(pattern) for pattern in trusted if "*" in pattern)
    return any(
        parsed.scheme == pattern.scheme and is_same_domain(parsed.netloc, pattern.netloc.lstrip("*"))
        for pattern in wildcards
    )


class BrowserOriginValidator:
    """ASGI middleware for the WebSocket router: a handshake whose Origin is not ours is
    refused before anything else runs (the server answers 403, as Channels' validator did)."""

    def __init__(self, application: Any) -> None:
        self.application = application
        self.denier = WebsocketDenier.as_asgi()

    async def __call__(self, scope: Any, receive: ASGIReceiveCallable, send: ASGISendCallable) -> Any:
        if scope["type"] != "websocket":
            raise ValueError("BrowserOriginValidator guards WebSocket connections only")
        request = HandshakeRequest(scope)
        origin = request.META.get("HTTP_ORIGIN")
        if origin is None or is_trusted_origin(origin, request):
            return await self.application(scope, receive, send)
        logger.warning(
            "Refused a WebSocket from Origin %r: not this site's (%s) nor in CSRF_TRUSTED_ORIGINS",
            origin,
            own_origin(request) or "its Host is not in ALLOWED_HOSTS",
        )
        return await self.denier(scope, receive, send)
