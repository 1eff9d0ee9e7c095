"""Budgets that span the socket and the API: one send rate per user.

The API's send throttle (``SendRateThrottle``, ``SEND_THROTTLE_RATE``) takes a token from the
user's bucket (``threads_app.token_bucket``: Redis when configured, so across processes); the
socket's ``client_message`` takes from the same bucket, so a user cannot go around the API's
429 by sending over the socket. From the event loop that is one Redis round trip, no thread.
"""

from typing import Any

from threads_app.throttling import SendRateThrottle
from threads_app.token_bucket import Rate, sends


async def wait_before_next_send(user: Any) -> float | None:
    """None if the user may send now, else the seconds until the budget allows it."""
    rate = Rate.parse(SendRateThrottle.get_rate())
    if rate is None:
        return None
    return await sends.atake(str(user.pk), rate)
