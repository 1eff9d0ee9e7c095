"""The upload rate limit: each upload stores up to ``MAX_IMAGE_BYTES`` in the database."""

from threads_app.budgets import UPLOADS, BudgetThrottle


class UploadRateThrottle(BudgetThrottle):
    """Limits a user's uploads (``UPLOAD_THROTTLE_RATE``, default ``30/min``: a burst of 30,
    refilled at one every 2 s), from the budget model's UPLOADS bucket."""

    budget = UPLOADS
