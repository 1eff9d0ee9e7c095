from django.contrib import admin

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
    readonly_fields = ("created_at", "updated_at", "generation")

    @admin.display(boolean=True, description="connected")
    def is_connected(self, session: SocketSession) -> bool:
        return session.is_connected
