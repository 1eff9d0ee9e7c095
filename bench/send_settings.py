"""Settings of the daphne that ``bench/send.py`` starts by default: Tether's own, plus one
change so that the benchmark cannot exhaust PostgreSQL's ``max_connections``.

Under ASGI every HTTP request runs its sync view in a thread of its own (Django's
``ThreadSensitiveContext``), so with ``CONN_MAX_AGE=60`` each request opens a PostgreSQL
connection that nobody closes until the thread's objects are garbage collected. Here a
request's connections are closed when the request finishes (what ``CONN_MAX_AGE=0`` does for
HTTP), while the channel layer's and the runtime's shared database thread keeps its
persistent connection. ``bench/send.py --as-configured`` serves ``chatproject.settings``
unchanged instead.
"""

from django.core.signals import request_finished
from django.db import connections

from chatproject.settings import *  # noqa: F403


def _close_request_connections(**_kwargs: object) -> None:
    # request_finished runs in the request's own thread: only its connections are closed.
    connections.close_all()


request_finished.connect(_close_request_connections, weak=False, dispatch_uid="bench-send-close-connections")
