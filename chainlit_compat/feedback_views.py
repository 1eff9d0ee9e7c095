"""``PUT`` / ``DELETE /feedback`` and ``POST /project/action`` at Chainlit's paths: Tether's
own views (``sessions_app.feedback``, ``sessions_app.action_views``, which already take
Chainlit's payloads and answer in its shapes), with their budgets, and authenticated as the
rest of Chainlit's API is (Origin-checked, no CSRF token).

Chainlit's frontend rates a run (``forId`` is the id of the run step its socket was shown,
``sessions_app.chainlit_runs``): the feedback is stored on the run's last assistant message,
the one the thumbs sit under, and a resumed thread shows it on the run again."""

import uuid
from typing import Any, cast

from django.contrib.auth.models import User
from rest_framework.request import Request
from rest_framework.response import Response

from chainlit_compat.origin_check import CHAINLIT_AUTHENTICATION, NOT_IN_SCHEMA
from sessions_app.action_views import CallActionView
from sessions_app.chainlit_runs import user_message_of
from sessions_app.feedback import FeedbackView
from threads_app.models import AcceptedMessage, Step, StepType


def rated_message(user: User, run_id: uuid.UUID, thread_id: uuid.UUID | None) -> uuid.UUID | None:
    """The last top-level assistant message after the user message whose run ``run_id`` is,
    before the next user message; None when ``run_id`` is no run of the user's live threads.

    A run drawn live is named after the id the client gave its message, one drawn on a resume
    after the stored id (``AcceptedMessage.key`` of the thread and that id): both are tried."""
    named = user_message_of(run_id)
    candidates = [named] if thread_id is None else [named, AcceptedMessage.key(thread_id, named)]
    asked = (
        Step.objects.filter(
            pk__in=candidates,
            type=StepType.USER_MESSAGE,
            thread__owner=user,
            thread__deleted_at__isnull=True,
        )
        .values("thread_id", "seq")
        .first()
    )
    if asked is None:
        return None
    after = Step.objects.filter(thread_id=asked["thread_id"], seq__gt=asked["seq"], parent_id__isnull=True)
    next_user = after.filter(type=StepType.USER_MESSAGE).order_by("seq").values_list("seq", flat=True).first()
    replies = after.filter(type=StepType.ASSISTANT_MESSAGE)
    if next_user is not None:
        replies = replies.filter(seq__lt=next_user)
    return replies.order_by("-seq").values_list("id", flat=True).first()


def _uuid(value: Any) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value)) if value else None
    except ValueError:
        return None


@NOT_IN_SCHEMA
class ChainlitFeedbackView(FeedbackView):
    authentication_classes = CHAINLIT_AUTHENTICATION

    def put(self, request: Request) -> Response:
        """A run's id names its last assistant message; any other id is taken as it is."""
        body: Any = request.data
        fields = body.get("feedback") if isinstance(body, dict) else None
        if isinstance(fields, dict) and request.user.is_authenticated:
            run_id = _uuid(fields.get("forId"))
            user = cast(User, request.user)
            message_id = rated_message(user, run_id, _uuid(fields.get("threadId"))) if run_id else None
            if message_id is not None:
                fields["forId"] = str(message_id)
        return super().put(request)


@NOT_IN_SCHEMA
class ChainlitActionView(CallActionView):
    authentication_classes = CHAINLIT_AUTHENTICATION
