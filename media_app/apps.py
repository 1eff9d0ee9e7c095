import inspect
from typing import Any

from django.apps import AppConfig
from django.db.backends.signals import connection_created


def _leave_multipart_to_django() -> None:
    """Daphne's requests inherit Twisted's parsing of POSTed forms: every multipart body (a
    10 MB upload included) is parsed once more, whole, in memory, before Django sees it, and
    a malformed one is answered with a bare 400 that never reaches the API. Django parses
    uploads itself (streaming files to disk), so Twisted's pass is switched off."""
    try:
        from daphne.http_protocol import WebRequest
    except ImportError:  # pragma: no cover - another ASGI server
        return
    original = WebRequest.__init__
    if getattr(original, "leaves_multipart_to_django", False):
        return
    if "parsePOSTFormSubmission" not in inspect.signature(WebRequest.__mro__[1].__init__).parameters:
        return  # pragma: no cover - a Twisted without the switch

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("parsePOSTFormSubmission", False)
        original(self, *args, **kwargs)

    __init__.leaves_multipart_to_django = True  # type: ignore[attr-defined]  # read back above
    WebRequest.__init__ = __init__


class MediaAppConfig(AppConfig):
    name = "media_app"
    verbose_name = "Media"

    def ready(self) -> None:
        # Every transcript read of threads_app strips photos from now on (threads_app imports
        # no other app: it offers the hook, this app fills it).
        from media_app.stripping import MediaContentFilter, register_sqlite_function
        from threads_app import content_filters

        content_filters.register(MediaContentFilter())
        # Thread reads list elements (files an app attached) the same way.
        from django.db.models.signals import post_delete

        from media_app.element_signals import delete_stored_file, on_thread_deleted
        from media_app.elements import thread_element_dicts
        from media_app.models import Element
        from threads_app import attachments
        from threads_app.signals import thread_deleted

        attachments.register(thread_element_dicts)
        post_delete.connect(delete_stored_file, sender=Element, dispatch_uid="media_app.element_file")
        thread_deleted.connect(on_thread_deleted, dispatch_uid="media_app.thread_elements")
        connection_created.connect(register_sqlite_function, dispatch_uid="media_app.strip_function")
        _leave_multipart_to_django()
