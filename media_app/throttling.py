"""The upload rate limit: each upload stores up to ``MAX_IMAGE_BYTES`` in the database."""

from threads_app.throttling import ConfigurableRateThrottle


class UploadRateThrottle(ConfigurableRateThrottle):
    """Limits a user's uploads (``UPLOAD_THROTTLE_RATE``, default ``30/min``)."""

    scope = "uploads"
