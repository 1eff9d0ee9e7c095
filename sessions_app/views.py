"""The sends over HTTP: ``POST /api/chat/send`` (the chat's other door besides the socket's
``client_message``, answered 200 once the send is durably accepted) and
``POST /api/integrations/threads/<id>/messages/`` (an integration's message, answered 202 once
accepted; the turn and the webhook delivery follow, ``runtime.integration_turns``).

An integration names its own thread ids: the first message to an unknown id opens the thread
for the caller; a thread that is another user's (or deleted) is a 404, as is an id that is not
a UUID. A busy thread answers ``409 {"detail": "thread busy"}`` with ``Retry-After`` (nothing
is recorded: send it again, same id, after the response it waits for).
"""

import uuid
from typing import Any, TypeVar, cast

from django.conf import settings
from django.contrib.auth.models import User
from django.utils.crypto import salted_hmac
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from media_app.parsers import PhotoJSONParser
from media_app.serializers import ImagesField
from sessions_app.runtime import chats, integration_turns
from sessions_app.server_loop import run_on_server_loop
from threads_app.models import Thread
from threads_app.parsers import BoundedJSONParser
from threads_app.selectors import get_owned_thread, thread_owner_id
from threads_app.serializers import TextField
from threads_app.services import MessageConflict, ThreadNotOwned, ensure_thread
from threads_app.throttling import SendRateThrottle

T = TypeVar("T")
MAX_MESSAGE_CHARS = settings.MAX_MESSAGE_CHARS


def _keyed_id(purpose: str, user: User, value: uuid.UUID) -> uuid.UUID:
    """A UUID derived from ``value`` for ``user``, keyed by the server's secret: the same every
    time, and nobody else can compute it (so nobody can create that row first)."""
    digest = salted_hmac(purpose, f"{user.pk}:{value}", algorithm="sha256").digest()
    return uuid.UUID(bytes=digest[:16], version=4)


def new_thread_id(user: User, message_id: uuid.UUID) -> uuid.UUID:
    """The thread a send without a threadId opens: derived from the message id, so a repeat of
    that send (also a concurrent one) lands in the same thread; keyed, so a squatter cannot
    create it first and turn the send into a 409."""
    return _keyed_id("tether.new-thread", user, message_id)


def integration_thread(user: User, chosen: uuid.UUID, *, name: str) -> Thread:
    """The caller's thread for an id its integration chose: the thread of that id when it is
    the caller's or free, else (another user has a thread of that id) the caller's own thread
    keyed by it, so that nobody can block an integration's ids by creating them first. The
    caller's own deleted thread is ``ThreadNotOwned``."""
    try:
        thread, _ = ensure_thread(user, chosen, name=name)
        return thread
    except ThreadNotOwned:
        if thread_owner_id(chosen) == user.pk:
            raise  # the caller's own thread, deleted
    thread, _ = ensure_thread(user, _keyed_id("tether.integration-thread", user, chosen), name=name)
    return thread


class SendRequestSerializer(serializers.Serializer[Any]):
    threadId = serializers.UUIDField(required=False, allow_null=True, help_text="Omit to start a new thread.")
    messageId = serializers.UUIDField(help_text="Client-generated; the idempotency key.")
    message = TextField(
        max_length=MAX_MESSAGE_CHARS,
        trim_whitespace=False,
        allow_blank=True,
        help_text="May be blank with images.",
    )
    images = ImagesField(required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not attrs["message"] and not attrs.get("images"):
            raise serializers.ValidationError({"message": ["This field may not be blank."]})
        return attrs


class SendAnswerSerializer(serializers.Serializer[Any]):
    threadId = serializers.UUIDField()
    messageId = serializers.UUIDField()
    queued = serializers.BooleanField(help_text="True when it waits behind a turn already running.")


class DetailSerializer(serializers.Serializer[Any]):
    detail = serializers.CharField()


class SendView(APIView):
    throttle_classes = [SendRateThrottle]
    # JSON bodies may carry photos: read past Django's 2.5 MB DATA_UPLOAD_MAX_MEMORY_SIZE.
    parser_classes = [PhotoJSONParser, FormParser, MultiPartParser]

    @extend_schema(
        operation_id="chat_send",
        request=SendRequestSerializer,
        responses={
            200: SendAnswerSerializer,
            400: OpenApiResponse(OpenApiTypes.OBJECT, description="Invalid body: DRF's errors by field."),
            401: OpenApiResponse(DetailSerializer, description="No credentials."),
            403: OpenApiResponse(DetailSerializer, description="Session without a CSRF token."),
            404: OpenApiResponse(DetailSerializer, description="No such thread for this user."),
            409: OpenApiResponse(DetailSerializer, description="The messageId was used for another message."),
            413: OpenApiResponse(
                DetailSerializer,
                description="The body is over SEND_MAX_BODY_BYTES (refused before it is read).",
            ),
            429: OpenApiResponse(DetailSerializer, description="Too many sends; see Retry-After."),
        },
    )
    def post(self, request: Request) -> Response:
        body = SendRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        message_id: uuid.UUID = data["messageId"]
        if data.get("threadId"):
            thread = get_owned_thread(cast(User, request.user), data["threadId"])
            if thread is None:
                raise NotFound("No such thread.")
        else:
            try:
                thread, _ = ensure_thread(
                    cast(User, request.user),
                    new_thread_id(cast(User, request.user), message_id),
                    name=data["message"],
                )
            except ThreadNotOwned:
                return _conflict()
        try:
            answer = run_on_server_loop(
                chats.accept_and_submit(
                    user=request.user,
                    thread=thread,
                    message_id=message_id,
                    text=data["message"],
                    images=data.get("images") or [],
                )
            )
        except MessageConflict:
            return _conflict()
        return Response(answer)


def _conflict() -> Response:
    return Response(
        {"detail": "This messageId was already used for a different message."},
        status=status.HTTP_409_CONFLICT,
    )


RETRY_AFTER_BUSY = "1"
RETRY_AFTER_UNAVAILABLE = "5"


class IntegrationMessageSerializer(serializers.Serializer[Any]):
    messageId = serializers.UUIDField(help_text="Client-generated; the idempotency key.")
    message = TextField(max_length=MAX_MESSAGE_CHARS, trim_whitespace=False)


class IntegrationAcceptedSerializer(serializers.Serializer[Any]):
    threadId = serializers.UUIDField()
    messageId = serializers.UUIDField()
    status = serializers.ChoiceField(choices=[integration_turns.ACCEPTED])


class IntegrationErrorSerializer(serializers.Serializer[Any]):
    detail = serializers.CharField()


class IntegrationBadRequestSerializer(serializers.Serializer[Any]):
    """DRF's 400 body: messages by field (or ``detail`` for a body that is not JSON)."""

    messageId = serializers.ListField(child=serializers.CharField(), required=False)
    message = serializers.ListField(child=serializers.CharField(), required=False)
    non_field_errors = serializers.ListField(child=serializers.CharField(), required=False)
    detail = serializers.CharField(required=False)


def _error(description: str) -> OpenApiResponse:
    return OpenApiResponse(IntegrationErrorSerializer, description=description)


class IntegrationJSONParser(BoundedJSONParser):
    """An integration message is text only: its body budget is ``INTEGRATION_MAX_BODY_BYTES``."""

    def max_body_bytes(self) -> int:
        return int(settings.INTEGRATION_MAX_BODY_BYTES)


class IntegrationMessageView(APIView):
    parser_classes = [IntegrationJSONParser]
    throttle_classes = [SendRateThrottle]

    @extend_schema(
        operation_id="integration_thread_message",
        summary="Send an integration's message to one of its threads",
        parameters=[
            OpenApiParameter(
                "thread_id",
                OpenApiTypes.UUID,
                OpenApiParameter.PATH,
                description=(
                    "Chosen by the integration; an unknown id opens a thread for the caller. An id "
                    "another user's thread has opens the caller's own thread for it (the answer's "
                    "threadId names it)."
                ),
            )
        ],
        request=IntegrationMessageSerializer,
        responses={
            202: IntegrationAcceptedSerializer,
            400: OpenApiResponse(IntegrationBadRequestSerializer, description="An invalid body."),
            401: _error("No valid credentials (a token or a session)."),
            403: _error("A session-authenticated request without a valid CSRF token."),
            404: _error("The caller's thread of that id was deleted, or the id is not a UUID."),
            409: _error("The thread is busy (see Retry-After), or the messageId was used for other content."),
            413: _error("The body is over INTEGRATION_MAX_BODY_BYTES (refused before it is read)."),
            415: _error("A body that is not JSON."),
            429: _error("Too many sends (see Retry-After)."),
            503: _error("The box's runtime did not answer (see Retry-After)."),
        },
    )
    def post(self, request: Request, thread_id: uuid.UUID) -> Response:
        body = IntegrationMessageSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        message_id: uuid.UUID = body.validated_data["messageId"]
        text: str = body.validated_data["message"]
        try:
            thread = integration_thread(cast(User, request.user), thread_id, name=text)
        except ThreadNotOwned:
            raise NotFound("No such thread.") from None
        outcome = run_on_server_loop(
            integration_turns.submit(
                user=request.user, thread=thread, box=thread.box, message_id=message_id, text=text
            )
        )
        if outcome == integration_turns.ACCEPTED:
            answer = {
                "threadId": str(thread.pk),
                "messageId": str(message_id),
                "status": integration_turns.ACCEPTED,
            }
            return Response(answer, status=status.HTTP_202_ACCEPTED)
        if outcome == integration_turns.BUSY:
            return Response(
                {"detail": "thread busy"},
                status=status.HTTP_409_CONFLICT,
                headers={"Retry-After": RETRY_AFTER_BUSY},
            )
        if outcome == integration_turns.GONE:
            raise NotFound("No such thread.")
        if outcome == integration_turns.CONFLICT:
            return Response(
                {"detail": "This messageId was already used for a different message."},
                status=status.HTTP_409_CONFLICT,
            )
        return Response(
            {"detail": "The box's runtime did not answer; send the message again with the same messageId."},
            status=status.HTTP_503_SERVICE_UNAVAILABLE,
            headers={"Retry-After": RETRY_AFTER_UNAVAILABLE},
        )
