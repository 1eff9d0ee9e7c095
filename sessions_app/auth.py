"""Socket authentication: the Django session cookie, or a DRF API token for integrations.

The cookie is handled by Channels' ``AuthMiddlewareStack``. This module adds the token, read
from an ``Authorization: Token <key>`` header (``TokenAuthMiddleware``) or from the ``token``
field of the Socket.IO auth payload (``user_for_token``; an expired or revoked token is
refused like an unknown one, see ``sessions_app.tokens``), and an Origin check that only
applies to browsers.
"""

from typing import Any, cast
from urllib.parse import ParseResult

from asgiref.typing import ASGIReceiveCallable, ASGISendCallable
from channels.middleware import BaseMiddleware
from channels.security.websocket import OriginValidator
from django.conf import settings
from django.contrib.auth.models import User
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


class TokenAuthMiddleware(BaseMiddleware):
    """Sets ``scope['user']`` from an ``Authorization: Token <key>`` header when present."""

    async def __call__(self, scope: Any, receive: ASGIReceiveCallable, send: ASGISendCallable) -> Any:
        for name, value in scope.get("headers", []):
            if name == b"authorization":
                kind, _, key = value.decode("latin-1").partition(" ")
                if kind.lower() == "token":
                    scope = dict(scope, token_user=await user_for_token(key.strip()))
                break
        return await super().__call__(scope, receive, send)


class BrowserOriginValidator(OriginValidator):
    """Refuse cross-site WebSocket hijacking: a browser's Origin must be one of ours.

    Browsers always send Origin on a WebSocket handshake; integrations (no browser, no
    cookie jar) send none and authenticate with a token, so a missing Origin is allowed.
    """

    def __init__(self, application: Any) -> None:
        super().__init__(application, settings.ALLOWED_HOSTS)

    def valid_origin(self, parsed_origin: ParseResult | None) -> bool:
        if parsed_origin is None:
            return True
        return super().valid_origin(parsed_origin)
