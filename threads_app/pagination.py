"""Pagination of the thread list (a cursor, newest first) and of a transcript (by ``seq``)."""

from typing import Any, cast

from django.utils.dateparse import parse_datetime
from rest_framework.exceptions import NotFound
from rest_framework.pagination import Cursor, CursorPagination
from rest_framework.request import Request
from rest_framework.utils.urls import replace_query_param

from threads_app import attachments
from threads_app.selectors import history_page, history_page_before


class ThreadCursorPagination(CursorPagination):
    """Threads newest first (``updated_at``, ties broken by id); ``?cursor=`` and ``?limit=``."""

    ordering = ("-updated_at", "-id")
    page_size = 20
    page_size_query_param = "limit"
    max_page_size = 100

    def decode_cursor(self, request: Request) -> Cursor | None:
        cursor = super().decode_cursor(request)
        # A hand-made cursor whose position is not a timestamp would otherwise reach the
        # query and fail there: it is as invalid as an undecodable one.
        if cursor is not None and cursor.position is not None:
            try:
                # The position is the query string's str; the stubs say int.
                valid = parse_datetime(cast(str, cursor.position)) is not None
            except ValueError:
                valid = False
            if not valid:
                raise NotFound(self.invalid_cursor_message)
        return cursor


class SeqPagination:
    """A transcript page in ``seq`` order, at most ``limit`` steps and ``READ_PAGE_MAX_BYTES``
    (a page stops early at that budget; its links go on from where it stopped).

    Forwards (``after_seq``): the steps after it; ``next`` repeats the request with
    ``after_seq`` set to the last seq returned, or is null when nothing follows (yet: a client
    polling for new entries asks again with that seq). Backwards (``before_seq``, a client
    scrolling up from the start of what it shows): the newest steps before it; ``previous``
    asks for the ones before those, or is null at the start of the thread.
    """

    default_limit = 100
    max_limit = 500

    def paginate(
        self, request: Request, thread_id: Any, *, after_seq: int, limit: int, before_seq: int | None = None
    ) -> dict[str, Any]:
        next_url = previous_url = None
        if before_seq is not None:
            results, older = history_page_before(
                thread_id, before_seq=before_seq, limit=limit, viewer_id=request.user.pk
            )
            if older is not None:
                previous_url = self._url(request, "before_seq", older, limit)
        else:
            results, more = history_page(
                thread_id, after_seq=after_seq, limit=limit, viewer_id=request.user.pk
            )
            if more:
                next_url = self._url(request, "after_seq", results[-1]["seq"], limit)
        elements = attachments.elements_of(thread_id, [step["id"] for step in results])
        return {"next": next_url, "previous": previous_url, "results": results, "elements": elements}

    @staticmethod
    def _url(request: Request, key: str, seq: int, limit: int) -> str:
        url = replace_query_param(request.build_absolute_uri(), key, seq)
        return replace_query_param(url, "limit", limit)
