"""The ``on_feedback`` hook of the feedback test apps: it records every call in ``CALLS`` and
fails on purpose when the comment is ``FAIL``, so a test can see what the app was told."""

from sessions_app import chat

FAIL = "make the hook fail"
CALLS: list[chat.Feedback] = []


async def record(feedback: chat.Feedback) -> None:
    CALLS.append(feedback)
    if feedback.comment == FAIL:
        raise RuntimeError("on_feedback failed on purpose")
