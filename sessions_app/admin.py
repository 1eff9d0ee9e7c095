"""Admin views for the session records (view only) and API tokens."""

from typing import Any

from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.db.models import QuerySet
from django.http import HttpRequest
from rest_framework.authtoken.admin import TokenAdmin
from rest_framework.authtoken.models import TokenProxy

from sessions_app import tokens
from sessions_app.models import SocketSession


@admin.register(SocketSession)
class SocketSessionAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "user",
        "thread_id",
        "client_type",
        "is_connected",
        "chat_started",
        "resumed",
        "has_first_interaction",
        "ended",
        "disconnected_at",
        "updated_at",
    )
    list_filter = ("client_type", "chat_started", "resumed", "has_first_interaction", "ended")
    search_fields = ("id", "thread_id", "user__username")

    # View only: the record is the runtime's (once-only flags, the socket and turn claims,
    # the generation); an edit here would break what they guarantee. Deleting stays possible.
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: SocketSession | None = None) -> bool:
        return False

    @admin.display(boolean=True, description="connected")
    def is_connected(self, session: SocketSession) -> bool:
        return session.is_connected


# --- API tokens: expiry shown, revocation from the user list ------------------------------------

User = get_user_model()
admin.site.unregister(User)


@admin.register(User)
class TetherUserAdmin(UserAdmin):
    """Django's user admin, plus revoking API tokens (deactivating a user keeps their token,
    but ``user_for_token`` and DRF refuse inactive users anyway)."""

    actions = ["revoke_api_tokens"]

    @admin.action(description="Revoke the API tokens of the selected users")
    def revoke_api_tokens(self, request: HttpRequest, queryset: QuerySet) -> None:
        count = tokens.revoke_for(queryset)
        self.message_user(request, f"Revoked {count} API token(s).", messages.SUCCESS)


admin.site.unregister(TokenProxy)


@admin.register(TokenProxy)
class ExpiringTokenAdmin(TokenAdmin):
    """DRF's token admin with each token's expiry; delete a token (on its page) to revoke it."""

    list_display = ("key", "user", "created", "expires", "expired")

    @admin.display(description="expires")
    def expires(self, token: TokenProxy) -> Any:
        return tokens.expires_at(token) or "never"

    @admin.display(boolean=True, description="expired")
    def expired(self, token: TokenProxy) -> bool:
        return tokens.is_expired(token)
