"""Admin views: boxes (the engine a choice, its options checked against the engine, the
webhook secret hidden and rotated), the session records (view only) and API tokens."""

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse
from rest_framework.authtoken.admin import TokenAdmin
from rest_framework.authtoken.models import TokenProxy

from sessions_app import tokens
from sessions_app.models import SocketSession
from sessions_app.runtime.engines import option_errors
from sessions_app.runtime.engines.options import WHOLE
from threads_app.models import Box
from threads_app.services import forget_engine_sessions, rotate_webhook_secret


class BoxForm(forms.ModelForm):
    """``engine_options`` must be valid for the chosen engine: a typo in a key or a bad value
    is an error naming the key here, not a failed turn later."""

    # Explicit only to choose the scheme a bare host gets (Django 6's default, https).
    webhook_url = forms.URLField(required=False, max_length=200, assume_scheme="https")

    class Meta:
        model = Box
        # The webhook secret is never rendered: it is rotated with an admin action.
        fields = ("owner", "name", "engine", "engine_options", "webhook_url")
        help_texts = {
            "engine_options": "A JSON object; the keys each engine takes are declared with it "
            "(sessions_app/runtime/engines). Changes apply from the box's next turn.",
        }

    def clean_engine_options(self) -> Any:
        # An empty field means no options (the JSON form field gives None).
        options = self.cleaned_data.get("engine_options")
        return {} if options in (None, "") else options

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        engine, options = cleaned.get("engine"), cleaned.get("engine_options")
        if engine and "engine_options" in cleaned:
            for key, message in sorted(option_errors(engine, options).items()):
                self.add_error("engine_options", f"{key}: {message}" if key != WHOLE else message)
        return cleaned


@admin.register(Box)
class BoxAdmin(admin.ModelAdmin):
    form = BoxForm
    list_display = ("name", "owner", "engine", "webhook_url", "runtime_owner", "created_at")
    list_filter = ("engine",)
    search_fields = ("name", "owner__username")
    readonly_fields = (
        "id",
        "webhook_secret_set",
        "runtime_owner",
        "runtime_heartbeat",
        "runtime_epoch",
        "created_at",
    )
    fieldsets = (
        (None, {"fields": ("owner", "name")}),
        ("Engine", {"fields": ("engine", "engine_options")}),
        ("Webhook", {"fields": ("webhook_url", "webhook_secret_set")}),
        ("Runtime", {"fields": ("id", "runtime_owner", "runtime_heartbeat", "runtime_epoch", "created_at")}),
    )
    actions = ["rotate_webhook_secret"]

    @admin.display(boolean=True, description="webhook secret set")
    def webhook_secret_set(self, box: Box) -> bool:
        return bool(box.webhook_secret)

    def save_model(self, request: HttpRequest, obj: Box, form: BoxForm, change: bool) -> None:
        super().save_model(request, obj, form, change)
        # The threads' engine conversation ids were made by the old engine; the pool forgets
        # them too, but only in the process that runs the box, and only once it notices.
        if change and "engine" in form.changed_data:
            forget_engine_sessions(obj.pk)

    @admin.action(description="Rotate the webhook secret of the selected boxes (shown once)")
    def rotate_webhook_secret(self, request: HttpRequest, queryset: QuerySet[Box]) -> TemplateResponse:
        """The new secrets are shown on the page this action answers with, and nowhere else:
        not in a message (stored in a cookie until shown), never in the form."""
        rotated = [(box, rotate_webhook_secret(box)) for box in queryset.select_related("owner")]
        context = {
            **self.admin_site.each_context(request),
            "title": "New webhook secrets",
            "opts": self.opts,
            "rotated": rotated,
        }
        # Admin views are never cached (``no-store``), so the page is not kept either.
        return TemplateResponse(request, "admin/threads_app/box/rotated_secrets.html", context)


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
