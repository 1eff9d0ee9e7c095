"""``POST /api/chat/send``: the HTTP door of the one acceptance path (the socket's
``client_message`` is the other). Answered 200 once the send is durably accepted."""

import asyncio
import contextvars
import uuid
from collections.abc import Coroutine
from typing import Any, TypeVar

from asgiref.sync import async_to_sync
from django.db import connection
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from media_app.parsers import PhotoJSONParser
from media_app.serializers import ImagesField
from sessions_app.runtime import bridge
from threads_app.selectors import get_owned_thread
from threads_app.services import MessageConflict, ThreadNotOwned, ensure_thread
from threads_app.throttling import SendRateThrottle

T = TypeVar("T")
MAX_MESSAGE_CHARS = 100_000
# A send without a threadId opens a thread whose id is derived from the message id, so a
# repeat of that send (also a concurrent one) lands in the same thread.
NEW_THREAD_NAMESPACE = uuid.UUID("1b0d7a0c-58c4-4c43-9a0b-0f5c8f8e2d51")


class SendRequestSerializer(serializers.Serializer):
    threadId = serializers.UUIDField(required=False, allow_null=True, help_text="Omit to start a new thread.")
    messageId = serializers.UUIDField(help_text="Client-generated; the idempotency key.")
    message = serializers.CharField(
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


class SendAnswerSerializer(serializers.Serializer):
    threadId = serializers.UUIDField()
    messageId = serializers.UUIDField()
    queued = serializers.BooleanField(help_text="True when it waits behind a turn already running.")


class DetailSerializer(serializers.Serializer):
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
            429: OpenApiResponse(DetailSerializer, description="Too many sends; see Retry-After."),
        },
    )
    def post(self, request: Request) -> Response:
        body = SendRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        message_id: uuid.UUID = data["messageId"]
        if data.get("threadId"):
            thread = get_owned_thread(request.user, data["threadId"])
            if thread is None:
                raise NotFound("No such thread.")
        else:
            try:
                thread, _ = ensure_thread(
                    request.user, uuid.uuid5(NEW_THREAD_NAMESPACE, str(message_id)), name=data["message"]
                )
            except ThreadNotOwned:
                return _conflict()
        try:
            answer = run_on_server_loop(
                bridge.accept_and_submit(
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


def run_on_server_loop(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a runtime coroutine from a sync view, on the server's event loop, in a fresh context.

    A coroutine called through plain ``async_to_sync`` inherits the request thread's executor;
    tasks it starts (engine runs, heartbeats, the mailbox reader) outlive the request, and
    their database calls would go to that executor after it has shut down. A fresh context
    gives them the loop's own executor, like everything the consumers start. The request's
    own connection goes back to the pool first rather than being held while waiting.
    """
    connection.close()

    async def detached() -> T:
        return await asyncio.get_running_loop().create_task(coroutine, context=contextvars.Context())

    return async_to_sync(detached)()


def _conflict() -> Response:
    return Response(
        {"detail": "This messageId was already used for a different message."},
        status=status.HTTP_409_CONFLICT,
    )
