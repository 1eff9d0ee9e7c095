"""Feedback on assistant messages: giving it, changing it, taking it back.

A user rates the assistant messages of their own live threads, one feedback per message
(``Feedback``'s unique key on step and user). Anything else a client names (another user's
step, a deleted thread's, a step that does not exist, a feedback that is not theirs) is
``FeedbackNotFound``, which the API answers 404, so ids of other users' records reveal
nothing. Synchronous and transactional like ``services``; async callers wrap them with
``database_sync_to_async``.
"""

import uuid
from dataclasses import dataclass
from enum import Enum

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction

from threads_app.models import FEEDBACK_COMMENT_MAX, Feedback, Step, StepType


class FeedbackNotFound(Exception):
    """No assistant message, or feedback, of that id is the caller's to rate or remove."""


class NotAnAssistantMessage(Exception):
    """The step is the caller's, but only assistant messages take feedback."""


class Change(Enum):
    """What a give did to the stored feedback; the app's hook hears of the first two."""

    CREATED = "created"
    CHANGED = "changed"
    UNCHANGED = "unchanged"  # the same verdict again (a resend): nothing to announce


@dataclass(frozen=True)
class Given:
    feedback: Feedback
    change: Change


def give_feedback(
    user: User,
    step_id: uuid.UUID,
    *,
    value: int,
    comment: str = "",
    thread_id: uuid.UUID | None = None,
) -> Given:
    """Store ``user``'s verdict on an assistant message, replacing the one they gave before.

    ``thread_id``, when the client names it (Chainlit's clients do), must be the step's thread.
    Concurrent gives for one message end in one row: the loser of the insert race updates
    the winner's row under its lock, so the last verdict wins and none is lost.
    """
    if value not in Feedback.Value.values:
        raise ValueError(f"feedback value must be 0 or 1, not {value!r}")
    if len(comment) > FEEDBACK_COMMENT_MAX:
        raise ValueError(f"a feedback comment holds at most {FEEDBACK_COMMENT_MAX} characters")
    step = (
        Step.objects.filter(pk=step_id, thread__owner=user, thread__deleted_at__isnull=True)
        .values("thread_id", "type")
        .first()
    )
    if step is None or (thread_id is not None and step["thread_id"] != thread_id):
        raise FeedbackNotFound(str(step_id))
    if step["type"] != StepType.ASSISTANT_MESSAGE:
        raise NotAnAssistantMessage(str(step_id))
    with transaction.atomic():
        mine = Feedback.objects.select_for_update().filter(step_id=step_id, user=user)
        existing = mine.first()
        if existing is None:
            try:
                with transaction.atomic():
                    created = Feedback.objects.create(
                        step_id=step_id, thread_id=step["thread_id"], user=user, value=value, comment=comment
                    )
                return Given(created, Change.CREATED)
            except IntegrityError:
                # Another request inserted it first (and has committed: the insert waited).
                existing = mine.get()
        if existing.value == value and existing.comment == comment:
            return Given(existing, Change.UNCHANGED)
        existing.value, existing.comment = value, comment
        existing.save(update_fields=["value", "comment", "updated_at"])
        return Given(existing, Change.CHANGED)


def remove_feedback(user: User, feedback_id: uuid.UUID) -> None:
    """Delete ``user``'s feedback of that id (on a live thread of theirs)."""
    deleted, _ = Feedback.objects.filter(
        pk=feedback_id, user=user, thread__owner=user, thread__deleted_at__isnull=True
    ).delete()
    if not deleted:
        raise FeedbackNotFound(str(feedback_id))
