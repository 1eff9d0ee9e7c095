"""Per-user rate limits for the API."""

from rest_framework.settings import api_settings
from rest_framework.throttling import UserRateThrottle


class SendRateThrottle(UserRateThrottle):
    """Limits a user's sends (``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["sends"]``, from the
    ``SEND_THROTTLE_RATE`` environment variable, default ``120/min``).

    The counters live in the default cache: per process unless a shared cache is configured.
    The rate is read when the throttle is built, not when the class is imported, so a settings
    change takes effect at once; an empty rate (or ``off``/``none``) disables the limit.
    """

    scope = "sends"

    def get_rate(self) -> str | None:
        rate = api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)
        if rate is None or str(rate).strip().lower() in {"", "off", "none"}:
            return None
        return str(rate)
