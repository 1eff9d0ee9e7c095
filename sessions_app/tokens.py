"""API tokens that expire and can be revoked.

Tokens are DRF's (``rest_framework.authtoken``: one per user, its ``created`` time kept). A
token is valid for ``API_TOKEN_LIFETIME_DAYS`` after it was created (0: forever); revoking a
token deletes it, so it stops working on the API and on the socket at once. Both doors ask
``is_expired``: the API through ``ExpiringTokenAuthentication``, the socket through
``sessions_app.auth.user_for_token``. Revoke with ``manage.py revoke_tokens`` or the admin.
"""

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.utils import timezone
from rest_framework.authentication import TokenAuthentication
from rest_framework.authtoken.models import Token
from rest_framework.exceptions import AuthenticationFailed


def lifetime() -> timedelta | None:
    """How long a token lives, or None when tokens do not expire."""
    days = float(getattr(settings, "API_TOKEN_LIFETIME_DAYS", 0) or 0)
    return timedelta(days=days) if days > 0 else None


def expires_at(token: Token) -> datetime | None:
    life = lifetime()
    return token.created + life if life is not None else None


def is_expired(token: Token, now: datetime | None = None) -> bool:
    ends = expires_at(token)
    return ends is not None and (now or timezone.now()) >= ends


def expired_tokens(now: datetime | None = None) -> QuerySet[Token]:
    life = lifetime()
    if life is None:
        return Token.objects.none()
    return Token.objects.filter(created__lte=(now or timezone.now()) - life)


def revoke_for(users: Any) -> int:
    """Delete the tokens of ``users`` (a queryset or a list of users); how many were deleted."""
    deleted, _ = Token.objects.filter(user__in=users).delete()
    return deleted


def revoke_expired() -> int:
    deleted, _ = expired_tokens().delete()
    return deleted


def issue(user: User) -> Token:
    """The user's valid token: the current one, or a new one when it expired (or none existed)."""
    token = Token.objects.filter(user=user).first()
    if token is not None and is_expired(token):
        token.delete()
        token = None
    if token is None:
        token, _ = Token.objects.get_or_create(user=user)
    return token


class ExpiringTokenAuthentication(TokenAuthentication):
    """DRF's ``Authorization: Token <key>``, refusing a token past its lifetime (401)."""

    def authenticate_credentials(self, key: str) -> tuple[Any, Token]:
        user, token = super().authenticate_credentials(key)
        if is_expired(token):
            raise AuthenticationFailed("Token has expired.")
        return user, token
