"""``chat.Feedback``, what an app's ``@chat.on_feedback`` hook receives, and the call of that hook.

The fields carry Chainlit's names (``forId``, ``threadId``, ``value`` 0 or 1, ``comment``), so
a hook written for Chainlit reads them unchanged. The feedback is already committed when the
hook runs: a hook that fails is logged and loses nothing.
"""

import logging
from dataclasses import dataclass
from typing import Literal, cast

from sessions_app.chat.hooks import load_app
from threads_app.models import Feedback as FeedbackRecord

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Feedback:
    """A user's verdict on an assistant message, as given or changed."""

    id: str
    forId: str  # the step (assistant message) it rates
    threadId: str
    value: Literal[0, 1]  # 0: thumbs down, 1: thumbs up
    comment: str | None
    userIdentifier: str  # the username of who gave it

    @classmethod
    def from_record(cls, record: FeedbackRecord, user_identifier: str) -> "Feedback":
        return cls(
            id=str(record.pk),
            forId=str(record.step_id),
            threadId=str(record.thread_id),
            value=cast(Literal[0, 1], record.value),
            comment=record.comment or None,
            userIdentifier=user_identifier,
        )


async def announce_feedback(feedback: Feedback) -> bool:
    """Run the app's ``on_feedback`` hook, if it has one; whether it ran without failing.

    It runs outside any chat session (feedback arrives over HTTP), so ``chat.user_session``
    and ``chat.Message`` are not available to it.
    """
    hook = load_app().on_feedback
    if hook is None:
        return True
    try:
        await hook(feedback)
    except Exception:
        logger.exception("the app's on_feedback hook failed for feedback %s", feedback.id)
        return False
    return True
