"""Per-user rate limits for the API (the budgets of ``threads_app.budgets``)."""

from threads_app.budgets import SENDS, BudgetThrottle


class SendRateThrottle(BudgetThrottle):
    """Limits a user's sends (``SEND_THROTTLE_RATE``, default ``120/min``: a burst of 120,
    refilled at 2 a second) with the bucket the chat socket takes from too
    (``budgets.SENDS``), so the API and the socket share one budget."""

    budget = SENDS
