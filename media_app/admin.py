"""Admin view of elements (files attached to messages), for inspection: what a thread holds,
how big, and a link to the thread. Read-only: an element changes only through the app that
sent it; deleting one here deletes its stored file too (``element_signals``)."""

from django.contrib import admin
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from media_app.images import human_size
from media_app.models import Element


@admin.register(Element)
class ElementAdmin(admin.ModelAdmin):
    list_display = ("name", "type", "display", "human_size", "thread_link", "owner", "created_at")
    list_filter = ("type", "display", "created_at")
    search_fields = ("name", "id", "thread__id", "owner__username")
    date_hierarchy = "created_at"
    fields = (
        "id",
        "thread_link",
        "for_id",
        "owner",
        "type",
        "name",
        "display",
        "mime",
        "size",
        "storage_key",
        "url",
        "image_size",
        "language",
        "page",
        "props",
        "created_at",
    )
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Element | None = None) -> bool:
        return False

    @admin.display(ordering="size", description="size")
    def human_size(self, element: Element) -> str:
        return human_size(element.size)

    @admin.display(description="thread")
    def thread_link(self, element: Element) -> SafeString:
        url = reverse("admin:threads_app_thread_change", args=[element.thread_id])
        return format_html('<a href="{}">{}</a>', url, element.thread_id)
