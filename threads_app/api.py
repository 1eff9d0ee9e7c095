"""The threads API: list, read, rename and delete threads; read their transcripts.

Every lookup goes through the caller's live threads (``selectors.owned_threads``), so a
thread that is another user's, deleted, missing or not even a UUID is a 404, never a 403 or
a 500.
"""

from typing import Any, cast

from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.http import Http404
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.filters import SearchFilter
from rest_framework.request import Request
from rest_framework.response import Response

from threads_app import selectors, services
from threads_app.models import Thread
from threads_app.pagination import SeqPagination, ThreadCursorPagination
from threads_app.parsers import BoundedJSONParser
from threads_app.serializers import (
    BootstrapErrorSerializer,
    BootstrapQuerySerializer,
    BootstrapSerializer,
    ErrorSerializer,
    HistoryErrorSerializer,
    HistoryQuerySerializer,
    HistorySerializer,
    RenameErrorSerializer,
    SearchErrorSerializer,
    ThreadRenameSerializer,
    ThreadSerializer,
)
from threads_app.throttling import SearchThrottle


class ThreadSearchFilter(SearchFilter):
    """``?search=`` matches names and message texts (``selectors.search_threads``); a bad or
    too long search is a 400 under the ``search`` key like any other validation error."""

    search_description = (
        "Only threads whose name contains every whitespace-separated term, or with a user or "
        'assistant message that matches (full-text on PostgreSQL: words, "phrases", -word, or; '
        f"every term on SQLite). At most {selectors.SEARCH_MAX_CHARS} characters."
    )

    def get_search_terms(self, request: Request) -> list[str]:
        limit = selectors.SEARCH_MAX_CHARS
        if len(request.query_params.get(self.search_param, "")) > limit:
            message = f"Ensure this field has no more than {limit} characters."
            raise serializers.ValidationError({self.search_param: [message]})
        try:
            return super().get_search_terms(request)
        except serializers.ValidationError as exc:
            raise serializers.ValidationError({self.search_param: exc.detail}) from exc

    def filter_queryset(self, request: Request, queryset: QuerySet[Any], view: Any) -> QuerySet[Any]:
        if not self.get_search_terms(request):  # validates, and an empty search is no filter
            return queryset
        return selectors.search_threads(queryset, request.query_params[self.search_param])


def _error(description: str) -> OpenApiResponse:
    return OpenApiResponse(ErrorSerializer, description=description)


UNAUTHENTICATED = _error("No valid credentials (a token or a session).")
FORBIDDEN = _error("A session-authenticated unsafe request without a valid CSRF token.")
NOT_FOUND = _error("No live thread with this id belongs to the caller.")


@extend_schema_view(
    list=extend_schema(
        summary="The caller's threads, newest first",
        responses={
            200: ThreadSerializer(many=True),
            400: OpenApiResponse(SearchErrorSerializer, description="A bad search term."),
            401: UNAUTHENTICATED,
            404: _error("An invalid cursor."),
            429: _error("Too many searches (SEARCHES_THROTTLE_RATE); Retry-After says when to search again."),
        },
    ),
    retrieve=extend_schema(
        summary="One thread (without its transcript)",
        responses={200: ThreadSerializer, 401: UNAUTHENTICATED, 404: NOT_FOUND},
    ),
    partial_update=extend_schema(
        summary="Rename a thread",
        request=ThreadRenameSerializer,
        responses={
            200: ThreadSerializer,
            400: OpenApiResponse(RenameErrorSerializer, description="An invalid name or body."),
            401: UNAUTHENTICATED,
            403: FORBIDDEN,
            404: NOT_FOUND,
        },
    ),
    destroy=extend_schema(
        summary="Delete a thread (it vanishes from every read)",
        responses={204: None, 401: UNAUTHENTICATED, 403: FORBIDDEN, 404: NOT_FOUND},
    ),
)
class ThreadViewSet(viewsets.GenericViewSet[Thread]):
    serializer_class = ThreadSerializer
    pagination_class = ThreadCursorPagination
    filter_backends = [ThreadSearchFilter]
    throttle_classes = [SearchThrottle]
    search_fields = ["name"]
    parser_classes = [BoundedJSONParser]
    http_method_names = ["get", "patch", "delete", "head", "options"]
    # Any path segment reaches the view (and its JSON 404), dots included.
    lookup_value_regex = "[^/]+"

    def get_queryset(self) -> QuerySet[Thread]:
        if getattr(self, "swagger_fake_view", False):  # schema generation: no user
            return Thread.objects.none()
        return selectors.owned_threads(cast(User, self.request.user))  # IsAuthenticated

    def get_object(self) -> Thread:
        # One answer for another user's, a deleted, a missing and a malformed id alike.
        try:
            return super().get_object()
        except Http404 as exc:
            raise NotFound("Thread not found.") from exc

    def list(self, request: Request) -> Response:
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        return self.get_paginated_response(ThreadSerializer(page, many=True).data)

    def retrieve(self, request: Request, pk: Any = None) -> Response:
        return Response(ThreadSerializer(self.get_object()).data)

    def partial_update(self, request: Request, pk: Any = None) -> Response:
        thread = self.get_object()
        body = ThreadRenameSerializer(data=request.data, partial=True)
        body.is_valid(raise_exception=True)
        if "name" in body.validated_data:
            services.rename_thread(thread, body.validated_data["name"])
        return Response(ThreadSerializer(thread).data)

    def destroy(self, request: Request, pk: Any = None) -> Response:
        services.soft_delete_thread(self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        summary="The transcript, in seq order",
        parameters=[HistoryQuerySerializer],
        responses={
            200: HistorySerializer,
            400: OpenApiResponse(HistoryErrorSerializer, description="A bad after_seq or limit."),
            401: UNAUTHENTICATED,
            404: NOT_FOUND,
        },
    )
    @action(detail=True, methods=["get"], pagination_class=None, filter_backends=[])
    def history(self, request: Request, pk: Any = None) -> Response:
        thread = self.get_object()
        query = HistoryQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        page = SeqPagination().paginate(request, thread.pk, **query.validated_data)
        return Response(HistorySerializer(page).data)

    @extend_schema(
        summary="A thread with its transcript, its pending sends and its failed ones",
        parameters=[BootstrapQuerySerializer],
        responses={
            200: BootstrapSerializer,
            400: OpenApiResponse(BootstrapErrorSerializer, description="A bad limit."),
            401: UNAUTHENTICATED,
            404: NOT_FOUND,
        },
    )
    @action(detail=True, methods=["get"], pagination_class=None, filter_backends=[])
    def bootstrap(self, request: Request, pk: Any = None) -> Response:
        thread = self.get_object()
        query = BootstrapQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        return Response(BootstrapSerializer(selectors.bootstrap(thread, **query.validated_data)).data)
