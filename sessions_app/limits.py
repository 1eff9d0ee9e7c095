"""Budgets that span the socket and the API: one send rate per user.

The API's send throttle (``SendRateThrottle``, ``SEND_THROTTLE_RATE``) counts a user's sends in
the cache (Redis when configured, so across processes); the socket's ``client_message`` counts
against the same budget, so a user cannot go around the API's 429 by sending over the socket.
"""

from typing import Any

from asgiref.sync import sync_to_async

from threads_app.throttling import SendRateThrottle


class _Sender:
    """What the throttle reads of a request: who sends."""

    def __init__(self, user: Any) -> None:
        self.user = user
        self.META: dict[str, str] = {}


def _wait_before_next_send(user: Any) -> float | None:
    throttle = SendRateThrottle()
    if throttle.allow_request(_Sender(user), None):  # reads .user only
        return None
    return throttle.wait() or 1.0


async def wait_before_next_send(user: Any) -> float | None:
    """None if the user may send now, else the seconds until the budget allows it."""
    return await sync_to_async(_wait_before_next_send, thread_sensitive=False)(user)
