from django.apps import AppConfig


class ThreadsAppConfig(AppConfig):
    name = "threads_app"
    verbose_name = "Threads"
