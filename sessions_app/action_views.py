"""``POST /api/project/action``: a click on an action button over HTTP, as Chainlit's client
sends it (``POST /project/action`` ``{sessionId, action}``), for clients that do not use the
socket's ``action_call``.

The caller's session and the action on one of its messages are checked here (another user's
session, a removed or made-up action: 404), then the click goes to the process holding the
session's socket, which runs the callback in that session as ``action_call`` does. The answer
comes once the click is handed over, so unlike Chainlit's it carries no ``response`` from the
callback (always null).
"""

from typing import Any, cast

from asgiref.sync import async_to_sync
from channels.layers import BaseChannelLayer, get_channel_layer
from django.contrib.auth.models import User
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import APIException, NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from sessions_app import actions
from sessions_app.chat.hooks import load_app
from sessions_app.views import DetailSerializer
from threads_app.budgets import CLICKS, BudgetThrottle
from threads_app.parsers import BoundedJSONParser


class ActionFieldsSerializer(serializers.Serializer[Any]):
    id = serializers.UUIDField(help_text="The action's id.")
    forId = serializers.UUIDField(help_text="The message (step id) it is attached to.")


class CallActionSerializer(serializers.Serializer[Any]):
    sessionId = serializers.UUIDField(help_text="The caller's chat session showing the message.")
    action = ActionFieldsSerializer(
        help_text="The action (other fields, as Chainlit sends them, are ignored)."
    )


class CallActionAnswerSerializer(serializers.Serializer[Any]):
    success = serializers.BooleanField()
    response = serializers.JSONField(
        allow_null=True, help_text="Always null: the callback runs after the answer."
    )


class NotConnected(APIException):
    status_code = 409
    default_detail = "The session has no connection right now; reconnect and click again."


class ClickRateThrottle(BudgetThrottle):
    """Clicks over HTTP spend from the bucket ``action_call`` spends from (CLICKS,
    ``CLICKS_THROTTLE_RATE``): whatever a callback does, neither door goes around it."""

    budget = CLICKS


class CallActionView(APIView):
    parser_classes = [BoundedJSONParser]
    throttle_classes = [ClickRateThrottle]

    @extend_schema(
        operation_id="project_action",
        summary="Click an action button: run the app's callback in the session",
        request=CallActionSerializer,
        responses={
            200: CallActionAnswerSerializer,
            400: OpenApiResponse(OpenApiTypes.OBJECT, description="An invalid body (DRF's errors by field)."),
            401: OpenApiResponse(
                DetailSerializer, description="No valid credentials (a token or a session)."
            ),
            403: OpenApiResponse(
                DetailSerializer, description="A session-authenticated request without a valid CSRF token."
            ),
            404: OpenApiResponse(
                DetailSerializer, description="No such action on a message of the caller's session."
            ),
            409: OpenApiResponse(DetailSerializer, description="The session has no socket right now."),
            413: OpenApiResponse(DetailSerializer, description="The body is over MAX_REQUEST_BODY_BYTES."),
            415: OpenApiResponse(DetailSerializer, description="A body that is not JSON."),
            429: OpenApiResponse(
                DetailSerializer, description="Over the click budget (CLICKS_THROTTLE_RATE); see Retry-After."
            ),
        },
    )
    def post(self, request: Request) -> Response:
        body = CallActionSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        fields = body.validated_data
        click = {"action": {key: str(value) for key, value in fields["action"].items()}}
        try:
            stored, channel = actions.lookup(cast(User, request.user), fields["sessionId"], click)
        except actions.ActionRefused as refused:
            raise NotFound(str(refused)) from None
        if stored.get("name") not in load_app().action_callbacks:
            raise NotFound(f"no callback for action {stored.get('name')!r}")
        if not channel:
            raise NotConnected()
        layer = cast(BaseChannelLayer, get_channel_layer())
        async_to_sync(layer.send)(channel, {"type": "session.action", "click": click})
        return Response({"success": True, "response": None})
