"""Socket authentication: the Django session cookie, or a DRF API token for integrations.

``SocketAuthMiddleware`` resolves the user once, at the handshake: from an ``Authorization:
Token <key>`` header when there is one (``scope["token_user"]``), else from the session cookie
(``scope["user"]``, as Channels' ``get_user`` reads a session). A token can also come in the
``token`` field of the Socket.IO auth payload (``user_for_token``); an expired or revoked token
is refused like an unknown one (``sessions_app.tokens``). A browser's Origin was checked
before (``sessions_app.origin``): a cookie sent by another site's page never gets this far.

Channels' ``AuthMiddlewareStack`` would resolve the cookie the same way, but it keeps three
middleware layers, a session wrapper and a lazy user alive for the whole life of every
connection (about 4 KiB of each idle socket); a socket needs its user only once.
"""

from importlib import import_module
from typing import Any, cast

from asgiref.typing import ASGIReceiveCallable, ASGISendCallable
from channels.auth import get_user
from django.conf import settings
from django.contrib.auth.models import User
from django.http.cookie import parse_cookie
from rest_framework.authtoken.models import Token

from sessions_app.database import database_sync_to_async
from sessions_app.tokens import is_expired


@database_sync_to_async
def user_for_token(key: Any) -> User | None:
    if not isinstance(key, str) or not key:
        return None
    token = Token.objects.select_related("user").filter(key=key).first()
    if token is None or not token.user.is_active or is_expired(token):
        return None
    return cast(User, token.user)


async def _user_of_cookie(header: bytes) -> Any:
    """The signed-in user of the session named by a Cookie header, else AnonymousUser."""
    key = parse_cookie(header.decode("latin-1")).get(settings.SESSION_COOKIE_NAME)
    store = import_module(settings.SESSION_ENGINE).SessionStore
    return await get_user(cast(Any, {"session": store(key)}))  # a scope of just a session


class SocketAuthMiddleware:
    """Sets ``scope["token_user"]`` from an ``Authorization: Token`` header, else
    ``scope["user"]`` from the session cookie (AnonymousUser without one)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def __call__(self, scope: Any, receive: ASGIReceiveCallable, send: ASGISendCallable) -> Any:
        headers = dict(scope.get("headers", []))
        kind, _, key = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
        if kind.lower() == "token":
            scope = dict(scope, token_user=await user_for_token(key.strip()))
        else:
            scope = dict(scope, user=await _user_of_cookie(headers.get(b"cookie", b"")))
        return await self.inner(scope, receive, send)
