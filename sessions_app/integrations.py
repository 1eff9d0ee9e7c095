"""``POST /api/integrations/threads/<id>/messages/``: an integration's message to one of its threads.

An integration (a bot bridge, a script) names its own thread ids: the first message to an
unknown id opens the thread for the caller; a thread that is another user's (or deleted) is a
404, as is an id that is not a UUID. The body is ``{"messageId", "message"}``; the message id
is the idempotency key, as for every send (a repeat gets the same answer and makes no second
record; the same id with other content is a 409).

The message is answered ``202 {"threadId", "messageId", "status": "accepted"}`` once its
AcceptedMessage row is committed and ``chat-user-message`` is on the thread's bus, before the
engine answers. The turn then runs in the process that owns the box (``bridge._at_owner``),
through the box's pool and the thread's ``ChatThreadSession``, which delivers complete
responses only. The user step and the assistant steps land in the transcript as for any turn;
when the box has a ``webhook_url``, the complete response is POSTed there, signed
(``sessions_app.webhooks``).

A busy thread refuses, it does not queue. A ChatThreadSession is queue-free by design, so a
message for a thread whose previous integration message is still being answered is answered
``409 {"detail": "thread busy"}`` with ``Retry-After`` and is *not* accepted: no record is
made, nothing is pending, and the integration sends it again (same id) after the response it
is waiting for. The check and the acceptance happen together in the owner (under the box's
lock), so two sends cannot both pass it; a repeat of the message being answered is still the
same 202. Messages for *different* threads of one box are all accepted: the pool runs one
integration thread at a time and parks the active one after its turn, so they take turns.
"""

import asyncio
import contextlib
import logging
import uuid
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ObjectDoesNotExist
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from sessions_app import webhooks
from sessions_app.api import MAX_MESSAGE_CHARS, run_on_server_loop
from sessions_app.mailbox import MailboxError
from sessions_app.runtime import bridge
from sessions_app.runtime.engines.base import UserTurn
from sessions_app.runtime.pool import pools
from sessions_app.runtime.thread_session import TurnResponse
from sessions_app.thread_bus import publish_accepted
from threads_app.models import AcceptedMessage, Box, Thread
from threads_app.parsers import BoundedJSONParser
from threads_app.services import MessageConflict, ThreadNotOwned, accept_message, ensure_thread, record_queued
from threads_app.throttling import SendRateThrottle

logger = logging.getLogger(__name__)

ACCEPTED, BUSY, CONFLICT, GONE, UNAVAILABLE = "accepted", "busy", "conflict", "gone", "unavailable"
RETRY_AFTER_BUSY = "1"
RETRY_AFTER_UNAVAILABLE = "5"


class IntegrationMessageSerializer(serializers.Serializer):
    messageId = serializers.UUIDField(help_text="Client-generated; the idempotency key.")
    message = serializers.CharField(max_length=MAX_MESSAGE_CHARS, trim_whitespace=False)


class IntegrationAcceptedSerializer(serializers.Serializer):
    threadId = serializers.UUIDField()
    messageId = serializers.UUIDField()
    status = serializers.ChoiceField(choices=[ACCEPTED])


class IntegrationErrorSerializer(serializers.Serializer):
    detail = serializers.CharField()


class IntegrationBadRequestSerializer(serializers.Serializer):
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
                description="Chosen by the integration; an unknown id opens a thread for the caller.",
            )
        ],
        request=IntegrationMessageSerializer,
        responses={
            202: IntegrationAcceptedSerializer,
            400: OpenApiResponse(IntegrationBadRequestSerializer, description="An invalid body."),
            401: _error("No valid credentials (a token or a session)."),
            403: _error("A session-authenticated request without a valid CSRF token."),
            404: _error("The thread is another user's, deleted, or the id is not a UUID."),
            409: _error("The thread is busy (see Retry-After), or the messageId was used for other content."),
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
            thread, _ = ensure_thread(request.user, thread_id, name=text)
        except ThreadNotOwned:
            raise NotFound("No such thread.") from None
        outcome = run_on_server_loop(
            submit(user=request.user, thread=thread, box=thread.box, message_id=message_id, text=text)
        )
        if outcome == ACCEPTED:
            answer = {"threadId": str(thread.pk), "messageId": str(message_id), "status": ACCEPTED}
            return Response(answer, status=status.HTTP_202_ACCEPTED)
        if outcome == BUSY:
            return Response(
                {"detail": "thread busy"},
                status=status.HTTP_409_CONFLICT,
                headers={"Retry-After": RETRY_AFTER_BUSY},
            )
        if outcome == GONE:
            raise NotFound("No such thread.")
        if outcome == CONFLICT:
            return Response(
                {"detail": "This messageId was already used for a different message."},
                status=status.HTTP_409_CONFLICT,
            )
        return Response(
            {"detail": "The box's runtime did not answer; send the message again with the same messageId."},
            status=status.HTTP_503_SERVICE_UNAVAILABLE,
            headers={"Retry-After": RETRY_AFTER_UNAVAILABLE},
        )


# --- the requesting side ---------------------------------------------------------------------


async def submit(*, user: Any, thread: Thread, box: Box, message_id: uuid.UUID, text: str) -> str:
    """Hand the message to the box's owner; ACCEPTED, BUSY, CONFLICT or UNAVAILABLE."""
    request = {
        "type": "runtime.integration",
        "thread": str(thread.pk),
        "user": user.pk,
        "author": user.get_username(),
        "message": str(message_id),
        "text": text,
    }
    try:
        answer = await bridge._at_owner(box.id, request)
    except MailboxError:
        # It may have been accepted all the same (a late answer): resending the same id is safe.
        logger.warning("box %s owner did not answer for integration message %s", box.id, message_id)
        return UNAVAILABLE
    return str(answer)


# --- the owner's side: what runs in the process holding the box's pool -------------------------

# Threads with an integration turn accepted and not yet answered, in this (the owner) process.
_in_flight: set[uuid.UUID] = set()
# Accepting is serialized per box, so the busy check and the acceptance are one step.
_box_locks: dict[uuid.UUID, asyncio.Lock] = {}
_tasks: set[asyncio.Task] = set()


def _accept(
    thread_id: uuid.UUID, user_id: Any, message_id: uuid.UUID, text: str
) -> tuple[AcceptedMessage, bool]:
    thread = Thread.objects.get(pk=thread_id)
    author = get_user_model().objects.get(pk=user_id)
    return accept_message(
        message_id=message_id,
        thread=thread,
        author=author,
        text=text,
        source=AcceptedMessage.Source.INTEGRATION,
    )


def _busy(box: Box, thread_id: uuid.UUID) -> bool:
    if thread_id in _in_flight:
        return True
    pool = pools.for_box(box.id, box.engine, box.engine_options)
    session = pool.thread_sessions.get(thread_id)
    chat = pool.chat_sessions.get(thread_id)  # the same thread opened interactively
    return bool(
        (session is not None and session.is_busy()) or (chat is not None and (chat.is_busy() or chat.queue))
    )


async def accept_here(request: dict[str, Any]) -> str:
    """The ``runtime.integration`` mailbox handler: accept the message and start its turn, or
    refuse it while the thread is busy (see the module docstring)."""
    thread_id = uuid.UUID(request["thread"])
    message_id = uuid.UUID(request["message"])
    box = await bridge._box_of(thread_id)
    if box is None:
        return GONE  # deleted since the view found it
    lock = _box_locks.setdefault(box.id, asyncio.Lock())
    async with lock:
        # A repeat of an accepted message is answered as the first time, busy or not.
        if _busy(box, thread_id) and not await _exists(message_id):
            return BUSY
        try:
            accepted, created = await database_sync_to_async(_accept)(
                thread_id, request["user"], message_id, request["text"]
            )
        except MessageConflict:
            return CONFLICT
        if not created:
            return ACCEPTED
        _in_flight.add(thread_id)
    try:
        await publish_accepted(accepted, author=request["author"], image_count=0)
        await database_sync_to_async(record_queued)(message_id, False)
    finally:
        task = asyncio.get_running_loop().create_task(
            _answer(box.id, thread_id, message_id, request["text"], request["author"])
        )
        _tasks.add(task)
        task.add_done_callback(_tasks.discard)
    return ACCEPTED


@database_sync_to_async
def _exists(message_id: uuid.UUID) -> bool:
    return AcceptedMessage.objects.filter(pk=message_id).exists()


@database_sync_to_async
def _fresh_box(box_id: uuid.UUID) -> Box | None:
    return Box.objects.filter(pk=box_id).first()


@database_sync_to_async
def _mark_failed(message_id: uuid.UUID) -> None:
    AcceptedMessage.objects.filter(pk=message_id, state=AcceptedMessage.State.PENDING).update(
        state=AcceptedMessage.State.FAILED
    )


async def _answer(
    box_id: uuid.UUID, thread_id: uuid.UUID, message_id: uuid.UUID, text: str, author: str
) -> None:
    """Run the turn through the box's pool, then deliver the complete response."""
    try:
        box = await _fresh_box(box_id)
        if box is None:
            return  # deleted since the message was accepted (and its records with it)
        pool = pools.for_box(box.id, box.engine, box.engine_options)
        turn = UserTurn(text=text, accepted_ids=[message_id])
        response = await pool.send_to_thread(thread_id, turn, author=author)
    except ObjectDoesNotExist:
        logger.warning("thread %s was deleted before message %s was answered", thread_id, message_id)
        return
    except Exception:
        logger.exception("integration turn for message %s on thread %s failed", message_id, thread_id)
        response = TurnResponse("The engine could not answer.", True, "error")
        with contextlib.suppress(Exception):
            await _mark_failed(message_id)
    finally:
        _in_flight.discard(thread_id)
    try:
        box = await _fresh_box(box_id)  # the webhook settings as they are now
        if box is not None and box.webhook_url:
            await webhooks.deliver(box, _payload(thread_id, message_id, response))
    except Exception:
        logger.exception("webhook delivery for message %s failed", message_id)


def _payload(thread_id: uuid.UUID, message_id: uuid.UUID, response: TurnResponse) -> dict[str, Any]:
    return {
        "threadId": str(thread_id),
        "messageId": str(message_id),
        "response": {
            "text": response.text,
            "isError": response.is_error,
            "outcome": response.outcome,
            "stepIds": list(response.step_ids),
        },
    }
