from django.apps import AppConfig


class SessionsAppConfig(AppConfig):
    name = "sessions_app"
    verbose_name = "Chat sessions"

    def ready(self) -> None:
        # The process-wide loops start with the process's mailbox (its first socket or send).
        from sessions_app import lifecycle, recovery  # noqa: F401
