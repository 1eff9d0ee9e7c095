"""Admin views of threads, steps, accepted sends, feedback and asks, for inspection (the box's admin lives in
``sessions_app.admin``: it checks engine options against the runtime's engines). Fields the
runtime owns are read-only."""

import json
from typing import TYPE_CHECKING, TypedDict

from django.contrib import admin
from django.db.models import Count, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.text import Truncator

from threads_app.models import AcceptedMessage, Ask, Feedback, Step, Thread

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations


class _StepCount(TypedDict):
    step_total: int


def _duration(step: Step) -> str:
    """How long a step ran (``running`` while it has no end)."""
    if step.start is None:
        return "-"
    if step.end is None:
        return "running"
    return f"{(step.end - step.start).total_seconds():.3f} s"


class StepInline(admin.TabularInline):
    model = Step
    fields = ("seq", "type", "name", "parent_id", "input", "output", "is_error", "start", "duration")
    readonly_fields = fields
    ordering = ("seq",)
    extra = 0
    can_delete = False
    show_change_link = True

    @admin.display(description="duration")
    def duration(self, step: Step) -> str:
        return _duration(step)


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
        "runtime_epoch",
        "last_seq",
        "text_bytes",
        "created_at",
        "updated_at",
        "settings_panel",
    )
    inlines = [StepInline]

    @admin.display(description="chat settings panel")
    def settings_panel(self, thread: Thread) -> SafeString | str:
        """The values as the user saw them: each input the app declared (``chat.ChatSettings``,
        kept in the metadata), its label and the thread's value."""
        declared = thread.metadata.get("chat_settings_inputs") if isinstance(thread.metadata, dict) else None
        if not isinstance(declared, list) or not declared:
            return "(the app declared no settings)"
        rows = [
            format_html(
                "<tr><th scope='row'>{}</th><td><code>{}</code></td><td>{}</td></tr>",
                spec.get("label", ""),
                spec.get("id", ""),
                json.dumps(thread.chat_settings.get(spec.get("id")), ensure_ascii=False),
            )
            for spec in declared
            if isinstance(spec, dict)
        ]
        return format_html(
            "<table><thead><tr><th>setting</th><th>id</th><th>value</th></tr></thead><tbody>{}</tbody></table>",
            format_html_join("", "{}", ((row,) for row in rows)),
        )

    def get_queryset(self, request: HttpRequest) -> QuerySet[Thread]:
        return (
            super().get_queryset(request).select_related("owner", "box").annotate(step_total=Count("steps"))
        )

    @admin.display(ordering="step_total", description="steps")
    def step_count(self, thread: "WithAnnotations[Thread, _StepCount]") -> int:
        return thread.step_total


@admin.register(Step)
class StepAdmin(admin.ModelAdmin):
    """Every transcript entry; the steps of a turn (tool calls...) show their parent, input,
    output, timing and whether they failed."""

    list_display = ("id", "thread", "seq", "type", "name", "parent_id", "is_error", "start", "duration")
    list_filter = ("type", "is_error")
    search_fields = ("id", "name", "input", "output", "thread__id", "parent_id")
    readonly_fields = (
        "id",
        "thread",
        "seq",
        "parent_id",
        "created_at",
        "start",
        "end",
        "duration",
        "writer",
        "writer_epoch",
    )
    fields = (
        "id",
        "thread",
        "seq",
        "type",
        "name",
        "parent_id",
        "input",
        "output",
        "content",
        "metadata",
        "is_error",
        "created_at",
        "start",
        "end",
        "duration",
        "writer",
        "writer_epoch",
    )

    @admin.display(description="duration")
    def duration(self, step: Step) -> str:
        return _duration(step)


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


def _change_link(url_name: str, pk: object, text: object) -> SafeString:
    """A link to an admin change page (``admin:<app>_<model>_change``), showing ``text`` escaped."""
    return format_html('<a href="{}">{}</a>', reverse(url_name, args=[pk]), text)


@admin.register(Feedback)
class FeedbackAdmin(admin.ModelAdmin):
    """View only: feedback is the users' own word; the admin reads it, filters and searches it."""

    list_display = ("verdict", "comment_excerpt", "message_link", "thread_link", "user_link", "updated_at")
    list_filter = ("value", "created_at", "updated_at")
    search_fields = ("comment",)
    date_hierarchy = "created_at"
    fields = (
        "id",
        "value",
        "comment",
        "message_link",
        "thread_link",
        "user_link",
        "created_at",
        "updated_at",
    )
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[Feedback]:
        return super().get_queryset(request).select_related("thread", "user", "step")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Feedback | None = None) -> bool:
        return False

    @admin.display(ordering="value", description="feedback")
    def verdict(self, feedback: Feedback) -> str:
        return feedback.get_value_display()

    @admin.display(description="comment")
    def comment_excerpt(self, feedback: Feedback) -> str:
        return Truncator(feedback.comment).chars(80)

    @admin.display(description="message")
    def message_link(self, feedback: Feedback) -> SafeString:
        return _change_link(
            "admin:threads_app_step_change",
            feedback.step_id,
            Truncator(feedback.step.output).chars(60) or feedback.step_id,
        )

    @admin.display(ordering="thread__name", description="thread")
    def thread_link(self, feedback: Feedback) -> SafeString:
        return _change_link("admin:threads_app_thread_change", feedback.thread_id, feedback.thread)

    @admin.display(ordering="user__username", description="user")
    def user_link(self, feedback: Feedback) -> SafeString:
        return _change_link("admin:auth_user_change", feedback.user_id, feedback.user.get_username())


@admin.register(Ask)
class AskAdmin(admin.ModelAdmin):
    """View only: the questions apps asked, whether and how they were answered (an ask stuck
    ``open`` past its deadline belonged to a process that died; nobody waits for it)."""

    list_display = ("question", "kind", "state", "user", "thread_id", "deadline", "created_at")
    list_filter = ("kind", "state", "created_at")
    search_fields = ("=thread_id", "=session_id", "=step_id")
    date_hierarchy = "created_at"
    readonly_fields = (
        "id",
        "kind",
        "state",
        "user",
        "thread_id",
        "session_id",
        "step_id",
        "spec",
        "message",
        "answer",
        "deadline",
        "created_at",
        "closed_at",
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[Ask]:
        return super().get_queryset(request).select_related("user")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Ask | None = None) -> bool:
        return False

    @admin.display(description="question")
    def question(self, ask: Ask) -> str:
        return Truncator(str(ask.message.get("output") or "")).chars(60)
