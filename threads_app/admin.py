"""Admin views for inspecting conversations: threads with their steps in order."""

from typing import TYPE_CHECKING, TypedDict

from django.contrib import admin
from django.db.models import Count, QuerySet
from django.http import HttpRequest

from threads_app.models import AcceptedMessage, Box, Step, Thread

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations


class _StepCount(TypedDict):
    _steps: int


@admin.register(Box)
class BoxAdmin(admin.ModelAdmin):
    list_display = ("name", "owner", "engine", "created_at")
    list_filter = ("engine",)
    search_fields = ("name", "owner__username")


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
    readonly_fields = ("id", "last_seq", "created_at", "updated_at")
    inlines = [StepInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Thread]:
        return super().get_queryset(request).select_related("owner", "box").annotate(_steps=Count("steps"))

    @admin.display(ordering="_steps", description="steps")
    def step_count(self, thread: "WithAnnotations[Thread, _StepCount]") -> int:
        return thread._steps


@admin.register(Step)
class StepAdmin(admin.ModelAdmin):
    list_display = ("id", "thread", "seq", "type", "name", "created_at")
    list_filter = ("type", "is_error")
    search_fields = ("id", "output", "thread__id")
    raw_id_fields = ("thread",)


@admin.register(AcceptedMessage)
class AcceptedMessageAdmin(admin.ModelAdmin):
    list_display = ("id", "thread", "author", "state", "accepted_at")
    list_filter = ("state",)
    search_fields = ("id", "text", "thread__id")
    raw_id_fields = ("thread", "box", "author", "step")
