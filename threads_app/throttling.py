"""Per-user rate limits for the API."""

import logging
from typing import Any

from rest_framework.settings import api_settings
from rest_framework.throttling import UserRateThrottle

from threads_app.budgets import SENDS, BudgetThrottle

logger = logging.getLogger(__name__)


class ConfigurableRateThrottle(UserRateThrottle):
    """A per-user rate from ``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"][scope]``.

    The counters live in the default cache: per process unless a shared cache is configured.
    The rate is read when the throttle is built, not when the class is imported, so a settings
    change takes effect at once; an empty rate (or ``off``/``none``) disables the limit.
    """

    scope: str  # UserRateThrottle's "user" or a subclass's own, never None

    def allow_request(self, request: Any, view: Any) -> bool:
        """A cache that is down (Redis restarting) lets the request through: a send must not
        fail with a 500 because its rate could not be counted."""
        try:
            return super().allow_request(request, view)
        except Exception as exc:
            logger.warning("rate limit %s not checked, the cache is unavailable: %r", self.scope, exc)
            return True

    def get_rate(self) -> str | None:
        rate = api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)
        if rate is None or str(rate).strip().lower() in {"", "off", "none"}:
            return None
        return str(rate)


class SendRateThrottle(BudgetThrottle):
    """Limits a user's sends (``SEND_THROTTLE_RATE``, default ``120/min``: a burst of 120,
    refilled at 2 a second) with the bucket the chat socket takes from too
    (``budgets.SENDS``), so the API and the socket share one budget."""

    budget = SENDS
