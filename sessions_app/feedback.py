"""Feedback on assistant messages over HTTP, with Chainlit's endpoint and payloads under
Tether's API prefix:

- ``PUT /api/feedback`` ``{feedback: {forId, value, comment?, threadId?}, sessionId?}`` gives
  or changes the caller's feedback on a message, answered ``{success, feedbackId}``;
- ``DELETE /api/feedback`` ``{feedbackId}`` takes it back, answered ``{success}``.

The row is committed first, then the app's ``@chat.on_feedback`` hook runs (when the verdict
is new or changed; a resend of the same one runs nothing), so a failing hook loses nothing.
Another user's step, thread or feedback id, a deleted thread's and an unknown one are 404.
"""

import uuid
from typing import Any, cast

from django.contrib.auth.models import User
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from sessions_app.chat.feedback import Feedback, announce_feedback
from sessions_app.server_loop import run_on_server_loop
from threads_app.budgets import FEEDBACK, BudgetThrottle
from threads_app.feedback import (
    Change,
    FeedbackNotFound,
    NotAnAssistantMessage,
    give_feedback,
    remove_feedback,
)
from threads_app.models import FEEDBACK_COMMENT_MAX
from threads_app.models import Feedback as FeedbackRecord
from threads_app.parsers import BoundedJSONParser
from threads_app.serializers import TextField


class FeedbackValueField(serializers.IntegerField):
    """0 or 1 as a JSON number: ``true``, ``"1"`` and ``1.0`` are refused, not converted."""

    default_error_messages = {"invalid": "Must be 0 (thumbs down) or 1 (thumbs up)."}

    def to_internal_value(self, data: Any) -> int:
        if type(data) is not int or data not in FeedbackRecord.Value.values:
            self.fail("invalid")
        return data


class CommentField(TextField):
    """Text only: a number or a boolean is refused rather than turned into a comment."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class FeedbackFieldsSerializer(serializers.Serializer[Any]):
    forId = serializers.UUIDField(help_text="The assistant message (step id) rated.")
    value = FeedbackValueField(help_text="0: thumbs down, 1: thumbs up.")
    comment = CommentField(
        max_length=FEEDBACK_COMMENT_MAX,
        required=False,
        allow_blank=True,
        allow_null=True,
        help_text="Optional; omitted, null or blank: no comment.",
    )
    threadId = serializers.UUIDField(
        required=False, allow_null=True, help_text="Optional; when given, the message's thread."
    )
    id = serializers.CharField(
        required=False, allow_null=True, allow_blank=True, help_text="Ignored (Chainlit's clients send it)."
    )


class FeedbackRequestSerializer(serializers.Serializer[Any]):
    feedback = FeedbackFieldsSerializer()
    sessionId = serializers.CharField(
        required=False, allow_blank=True, help_text="Ignored (Chainlit's clients send it)."
    )


class FeedbackAnswerSerializer(serializers.Serializer[Any]):
    success = serializers.BooleanField()
    feedbackId = serializers.UUIDField()


class FeedbackDeleteSerializer(serializers.Serializer[Any]):
    feedbackId = serializers.UUIDField()


class FeedbackDeletedSerializer(serializers.Serializer[Any]):
    success = serializers.BooleanField()


class FeedbackErrorSerializer(serializers.Serializer[Any]):
    detail = serializers.CharField()


def _error(description: str) -> OpenApiResponse:
    return OpenApiResponse(FeedbackErrorSerializer, description=description)


COMMON_ERRORS = {
    401: _error("No valid credentials (a token or a session)."),
    403: _error("A session-authenticated request without a valid CSRF token."),
    413: _error("The body is over MAX_REQUEST_BODY_BYTES (refused before it is read)."),
    415: _error("A body that is not JSON."),
    429: _error("Over the feedback budget (FEEDBACK_THROTTLE_RATE); see Retry-After."),
}


class FeedbackSchema(AutoSchema):
    """drf-spectacular describes no body for a DELETE; Chainlit's ``DELETE /feedback`` takes
    one (``{feedbackId}``), so this view's DELETE is described as its PUT would be."""

    def _get_request_body(self, direction: str = "request") -> Any:
        if self.method != "DELETE":
            return super()._get_request_body(direction)  # type: ignore[no-untyped-call]  # unannotated in drf-spectacular
        self.method = "PUT"
        try:
            return super()._get_request_body(direction)  # type: ignore[no-untyped-call]  # unannotated in drf-spectacular
        finally:
            self.method = "DELETE"


class FeedbackRateThrottle(BudgetThrottle):
    """Limits a user's feedback writes (``FEEDBACK_THROTTLE_RATE``, default ``60/min``): each
    one is a database write and may run the app's ``on_feedback``."""

    budget = FEEDBACK


class FeedbackView(APIView):
    schema = FeedbackSchema()
    parser_classes = [BoundedJSONParser]  # JSON bodies only (the budget: MAX_REQUEST_BODY_BYTES)
    throttle_classes = [FeedbackRateThrottle]

    @extend_schema(
        operation_id="feedback_update",
        summary="Give or change the caller's feedback on an assistant message",
        request=FeedbackRequestSerializer,
        responses={
            200: FeedbackAnswerSerializer,
            400: OpenApiResponse(
                OpenApiTypes.OBJECT,
                description="An invalid body (DRF's errors by field), or a step that is not an assistant message.",
            ),
            404: _error("No assistant message of that id in a live thread of the caller's."),
            **COMMON_ERRORS,
        },
    )
    def put(self, request: Request) -> Response:
        body = FeedbackRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        fields = body.validated_data["feedback"]
        user = cast(User, request.user)  # IsAuthenticated
        try:
            given = give_feedback(
                user,
                fields["forId"],
                value=fields["value"],
                comment=fields.get("comment") or "",
                thread_id=fields.get("threadId"),
            )
        except FeedbackNotFound:
            raise NotFound("No such message.") from None
        except NotAnAssistantMessage:
            raise ValidationError(
                {"feedback": {"forId": ["Only assistant messages take feedback."]}}
            ) from None
        if given.change is not Change.UNCHANGED:
            run_on_server_loop(announce_feedback(Feedback.from_record(given.feedback, user.get_username())))
        return Response({"success": True, "feedbackId": str(given.feedback.pk)})

    @extend_schema(
        operation_id="feedback_delete",
        summary="Take back the caller's feedback",
        request=FeedbackDeleteSerializer,
        responses={
            200: FeedbackDeletedSerializer,
            400: OpenApiResponse(OpenApiTypes.OBJECT, description="An invalid body (DRF's errors by field)."),
            404: _error("No feedback of that id is the caller's."),
            **COMMON_ERRORS,
        },
    )
    def delete(self, request: Request) -> Response:
        body = FeedbackDeleteSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        feedback_id: uuid.UUID = body.validated_data["feedbackId"]
        try:
            remove_feedback(cast(User, request.user), feedback_id)
        except FeedbackNotFound:
            raise NotFound("No such feedback.") from None
        return Response({"success": True})
