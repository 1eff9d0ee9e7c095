"""Chainlit's frontend sends no CSRF token: its unsafe requests are checked by Origin instead.

A browser sends ``Origin`` with every ``fetch`` and ``XMLHttpRequest`` that is not a GET or
HEAD, same-origin ones included, so a request whose Origin is not ours (nor one of
``CSRF_TRUSTED_ORIGINS``, by ``sessions_app.origin``'s rule, the socket handshake's) is another
site's page riding on the session cookie: refused 403. Without Origin the Referer's origin is
checked the same way; a request with neither comes from no browser, so nothing ambient rides
on it and its credentials are checked as usual.
"""

from typing import cast
from urllib.parse import urlsplit

from django.http import HttpRequest
from drf_spectacular.utils import extend_schema
from rest_framework.authentication import BaseAuthentication, SessionAuthentication
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request

from sessions_app.origin import is_trusted_origin
from sessions_app.tokens import ExpiringTokenAuthentication

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})


def browser_origin(request: HttpRequest) -> str | None:
    """The origin a browser says the request comes from (Origin, else the Referer's), or None."""
    origin = request.META.get("HTTP_ORIGIN")
    if origin is not None:
        return str(origin)
    referer = request.META.get("HTTP_REFERER")
    if not referer:
        return None
    try:
        parts = urlsplit(referer)
    except ValueError:
        return "null"
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else "null"


def foreign_origin(request: HttpRequest) -> str | None:
    """Why an unsafe request a browser sent from a page that is not ours is refused; None
    when it may go on."""
    if request.method in SAFE_METHODS:
        return None
    origin = browser_origin(request)
    if origin is not None and not is_trusted_origin(origin, request):
        return f"Origin {origin!r} is not this site's nor in CSRF_TRUSTED_ORIGINS."
    return None


class OriginCheckedSessionAuthentication(SessionAuthentication):
    """DRF's session authentication with the Origin check in place of the CSRF token."""

    def enforce_csrf(self, request: Request) -> None:
        # A DRF request reads META, method and host from its Django request.
        refusal = foreign_origin(cast(HttpRequest, request))
        if refusal is not None:
            raise PermissionDenied(refusal)


# What every endpoint of Chainlit's API authenticates with: an API token (``Authorization:
# Token``), else the session cookie, Origin-checked. The token comes first so that a request
# without credentials is a 401 (Chainlit's frontend signs in again on a 401), not a 403.
CHAINLIT_AUTHENTICATION: list[type[BaseAuthentication]] = [
    ExpiringTokenAuthentication,
    OriginCheckedSessionAuthentication,
]

# Chainlit's API is Chainlit's (documented by Chainlit, its frontend the client): its views stay
# out of Tether's OpenAPI schema, which documents ``/api/``.
NOT_IN_SCHEMA = extend_schema(exclude=True)
