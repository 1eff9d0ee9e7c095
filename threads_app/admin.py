"""Admin views: boxes (engine and options checked, webhook secret hidden and rotated), and
threads, steps and accepted sends for inspection. Fields the runtime owns are read-only."""

from django.contrib import admin
from django.db.models import Count, QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse

from threads_app.forms import BoxForm
from threads_app.models import AcceptedMessage, Box, Step, Thread
from threads_app.services import forget_engine_sessions, rotate_webhook_secret


@admin.register(Box)
class BoxAdmin(admin.ModelAdmin):
    form = BoxForm
    list_display = ("name", "owner", "engine", "webhook_url", "runtime_owner", "created_at")
    list_filter = ("engine",)
    search_fields = ("name", "owner__username")
    readonly_fields = ("id", "webhook_secret_set", "runtime_owner", "runtime_heartbeat", "created_at")
    fieldsets = (
        (None, {"fields": ("owner", "name")}),
        ("Engine", {"fields": ("engine", "engine_options")}),
        ("Webhook", {"fields": ("webhook_url", "webhook_secret_set")}),
        ("Runtime", {"fields": ("id", "runtime_owner", "runtime_heartbeat", "created_at")}),
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
            "opts": self.model._meta,
            "rotated": rotated,
        }
        # Admin views are never cached (``no-store``), so the page is not kept either.
        return TemplateResponse(request, "admin/threads_app/box/rotated_secrets.html", context)


class StepInline(admin.TabularInline):
    model = Step
    fields = ("seq", "type", "name", "output", "is_error", "created_at")
    readonly_fields = fields
    ordering = ("seq",)
    extra = 0
    can_delete = False
    show_change_link = True


@admin.register(Thread)
class ThreadAdmin(admin.ModelAdmin):
    list_display = ("__str__", "owner", "box", "step_count", "updated_at", "deleted_at")
    list_filter = ("deleted_at", "chat_profile", "box__engine")
    search_fields = ("name", "id", "owner__username")
    # A thread stays with the box and owner it was made for; the rest is the runtime's.
    readonly_fields = ("id", "owner", "box", "engine_session_id", "last_seq", "created_at", "updated_at")
    inlines = [StepInline]

    def get_queryset(self, request):  # type: ignore[no-untyped-def]
        return super().get_queryset(request).select_related("owner", "box").annotate(_steps=Count("steps"))

    @admin.display(ordering="_steps", description="steps")
    def step_count(self, thread: Thread) -> int:
        return thread._steps  # type: ignore[attr-defined]


@admin.register(Step)
class StepAdmin(admin.ModelAdmin):
    list_display = ("id", "thread", "seq", "type", "name", "created_at")
    list_filter = ("type", "is_error")
    search_fields = ("id", "output", "thread__id")
    readonly_fields = ("id", "thread", "seq", "parent_id", "created_at", "start", "end")


@admin.register(AcceptedMessage)
class AcceptedMessageAdmin(admin.ModelAdmin):
    """View only: every field is the send path's and the recovery loop's bookkeeping."""

    list_display = ("id", "thread", "author", "state", "accepted_at")
    list_filter = ("state",)
    search_fields = ("id", "text", "thread__id")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: AcceptedMessage | None = None) -> bool:
        return False
