"""Admin views of threads, steps and accepted sends, for inspection (the box's admin lives in
``sessions_app.admin``: it checks engine options against the runtime's engines). Fields the
runtime owns are read-only."""

from typing import TYPE_CHECKING, TypedDict

from django.contrib import admin
from django.db.models import Count, QuerySet
from django.http import HttpRequest

from threads_app.models import AcceptedMessage, Step, Thread

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations


class _StepCount(TypedDict):
    step_total: int


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
    readonly_fields = (
        "id",
        "owner",
        "box",
        "engine_session_id",
        "runtime_owner",
        "last_seq",
        "created_at",
        "updated_at",
    )
    inlines = [StepInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Thread]:
        return (
            super().get_queryset(request).select_related("owner", "box").annotate(step_total=Count("steps"))
        )

    @admin.display(ordering="step_total", description="steps")
    def step_count(self, thread: "WithAnnotations[Thread, _StepCount]") -> int:
        return thread.step_total


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
