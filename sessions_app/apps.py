from django.apps import AppConfig


class SessionsAppConfig(AppConfig):
    name = "sessions_app"
    verbose_name = "Chat sessions"

    def ready(self) -> None:
        # The process's in-memory state, wired once (``sessions_app.state``); its loops start
        # with the process's mailbox (its first socket or send).
        from sessions_app.state import process_state

        process_state.install()
