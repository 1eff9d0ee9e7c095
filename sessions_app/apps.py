from django.apps import AppConfig


class SessionsAppConfig(AppConfig):
    name = "sessions_app"
    verbose_name = "Chat sessions"

    def ready(self) -> None:
        # The process's in-memory state, wired once (``sessions_app.state``); its loops start
        # with the process's mailbox (its first socket or send).
        from django.contrib.auth import get_user_model
        from django.db.models.signals import post_save

        from sessions_app import metrics
        from sessions_app.record_events import on_thread_deleted, on_user_saved
        from sessions_app.state import process_state
        from threads_app.signals import budget_refused, thread_deleted

        process_state.install()
        # Ownership follows the record: deleting a thread or deactivating a user ends what
        # is live on it.
        thread_deleted.connect(on_thread_deleted, dispatch_uid="sessions_app.thread_deleted")
        budget_refused.connect(metrics.count_http_budget_refusal, dispatch_uid="sessions_app.budget_refused")
        post_save.connect(on_user_saved, sender=get_user_model(), dispatch_uid="sessions_app.user_saved")
