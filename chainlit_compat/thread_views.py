"""Chainlit's thread endpoints on Tether's thread records (``threads_app``):

- ``POST /project/threads`` ``{pagination: {first, cursor}, filter: {feedback, search,
  userId}}``: the caller's threads newest first (the thread list's order), answered
  ``{pageInfo: {hasNextPage, startCursor, endCursor}, data: [ThreadDict]}``. The cursor is the
  last thread of the page before, as Chainlit's data layers page; ``userId`` is ignored (the
  caller's threads only, as Chainlit overwrites it); a search spends the search budget.
- ``GET /project/thread/<id>``: the ThreadDict with its newest steps (``resume_thread``'s read),
  each turn's in its run (``sessions_app.chainlit_runs``).
- ``PUT /project/thread`` ``{threadId, name}`` renames, ``DELETE /project/thread`` ``{threadId}``
  deletes; both answered ``{success: true}``.
- ``GET /project/thread/<id>/element/<element id>``: an ElementDict.

Another user's, a deleted and a malformed id are 404, as on ``/api/threads/``.
"""

import uuid
from typing import Any, cast

from django.contrib.auth.models import User
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from chainlit_compat.origin_check import CHAINLIT_AUTHENTICATION, NOT_IN_SCHEMA
from media_app.elements import owned_element_dict
from sessions_app.chainlit_runs import nest_in_runs
from threads_app import selectors, services
from threads_app.budgets import SEARCHES, BudgetThrottle
from threads_app.models import Thread
from threads_app.pagination import ThreadCursorPagination
from threads_app.parsers import BoundedJSONParser
from threads_app.serializers import ThreadRenameSerializer

NOT_FOUND = "Thread not found"


class PaginationSerializer(serializers.Serializer[Any]):
    first = serializers.IntegerField(min_value=1)
    cursor = serializers.UUIDField(required=False, allow_null=True)


class ThreadFilterSerializer(serializers.Serializer[Any]):
    feedback = serializers.ChoiceField(choices=[0, 1], required=False, allow_null=True)
    search = serializers.CharField(
        required=False, allow_null=True, allow_blank=True, max_length=selectors.SEARCH_MAX_CHARS
    )
    userId = serializers.CharField(required=False, allow_null=True, allow_blank=True)


class ThreadsRequestSerializer(serializers.Serializer[Any]):
    pagination = PaginationSerializer()
    filter = ThreadFilterSerializer()


class ThreadIdSerializer(serializers.Serializer[Any]):
    threadId = serializers.CharField()


class ThreadRenameRequestSerializer(ThreadIdSerializer):
    name = serializers.JSONField()  # checked by the thread API's own rename serializer


class ChainlitSearchThrottle(BudgetThrottle):
    """A list with a search spends from the search budget (``SEARCHES_THROTTLE_RATE``), as
    ``GET /api/threads/?search=`` does; a plain list spends nothing."""

    budget = SEARCHES
    refuses_whole_route = False

    def allow_request(self, request: Any, view: Any) -> bool:
        body = request.data if isinstance(request.data, dict) else {}
        wanted = body.get("filter")
        search = wanted.get("search") if isinstance(wanted, dict) else None
        if not isinstance(search, str) or not search.split():
            return True
        return super().allow_request(request, view)


def thread_uuid(thread_id: Any) -> uuid.UUID:
    """A thread id as given; a malformed one is as not found as another user's."""
    try:
        return uuid.UUID(str(thread_id))
    except ValueError:
        raise NotFound(NOT_FOUND) from None


def owned_thread(user: User, thread_id: Any) -> Thread:
    thread = selectors.get_owned_thread(user, thread_uuid(thread_id))
    if thread is None:
        raise NotFound(NOT_FOUND)
    return thread


@NOT_IN_SCHEMA
class ChainlitView(APIView):
    authentication_classes = CHAINLIT_AUTHENTICATION
    parser_classes = [BoundedJSONParser]


class ThreadListView(ChainlitView):
    throttle_classes = [ChainlitSearchThrottle]

    def post(self, request: Request) -> Response:
        body = ThreadsRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        user = cast(User, request.user)
        page, wanted = body.validated_data["pagination"], body.validated_data["filter"]
        threads = selectors.owned_threads(user)
        if wanted.get("search"):
            threads = selectors.search_threads(threads, wanted["search"])
        if wanted.get("feedback") is not None:
            threads = selectors.threads_with_feedback(user, threads, int(wanted["feedback"]))
        if page.get("cursor"):
            threads = selectors.owned_threads_after(user, threads, page["cursor"])
        size = min(page["first"], ThreadCursorPagination.max_page_size)
        listed = list(threads.order_by(*ThreadCursorPagination.ordering)[: size + 1])
        data = [selectors.thread_summary(thread) for thread in listed[:size]]
        return Response(
            {
                "pageInfo": {
                    "hasNextPage": len(listed) > size,
                    "startCursor": data[0]["id"] if data else None,
                    "endCursor": data[-1]["id"] if data else None,
                },
                "data": data,
            }
        )


class ThreadView(ChainlitView):
    def get(self, request: Request, thread_id: str) -> Response:
        found = selectors.resume_thread_dict(cast(User, request.user), thread_uuid(thread_id))
        if found is None:
            raise NotFound(NOT_FOUND)
        # Chainlit's frontend finds each turn's messages, and their feedback, in its run.
        return Response({**found, "steps": nest_in_runs(found["steps"])})


class ThreadChangeView(ChainlitView):
    def put(self, request: Request) -> Response:
        body = ThreadRenameRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        thread = owned_thread(cast(User, request.user), body.validated_data["threadId"])
        name = ThreadRenameSerializer(data={"name": body.validated_data["name"]})
        name.is_valid(raise_exception=True)
        services.rename_thread(thread, name.validated_data["name"])
        return Response({"success": True})

    def delete(self, request: Request) -> Response:
        body = ThreadIdSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        services.soft_delete_thread(owned_thread(cast(User, request.user), body.validated_data["threadId"]))
        return Response({"success": True})


class ThreadElementView(ChainlitView):
    def get(self, request: Request, thread_id: str, element_id: str) -> Response:
        thread = owned_thread(cast(User, request.user), thread_id)
        try:
            parsed = uuid.UUID(element_id)
        except ValueError:
            raise NotFound("Element not found") from None
        found = owned_element_dict(cast(User, request.user).pk, thread.pk, parsed)
        if found is None:
            raise NotFound("Element not found")
        return Response(found)
