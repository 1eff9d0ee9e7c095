"""Per-user rate limits for the API (the budgets of ``threads_app.budgets``)."""

from typing import Any

from threads_app.budgets import SEARCHES, SENDS, BudgetThrottle


class SendRateThrottle(BudgetThrottle):
    """Limits a user's sends (``SEND_THROTTLE_RATE``, default ``120/min``: a burst of 120,
    refilled at 2 a second) with the bucket the chat socket takes from too
    (``budgets.SENDS``), so the API and the socket share one budget."""

    budget = SENDS


class SearchThrottle(BudgetThrottle):
    """Limits a user's thread searches (``SEARCHES_THROTTLE_RATE``, default ``60/min``): a
    list with a ``?search=`` of any term spends from ``budgets.SEARCHES``, since a search
    reads the user's messages; a plain list (one index read of a page) spends nothing."""

    budget = SEARCHES
    refuses_whole_route = False  # GET /api/threads/ without a search spends nothing

    def allow_request(self, request: Any, view: Any) -> bool:
        if getattr(view, "action", None) != "list" or not request.query_params.get("search", "").split():
            return True
        return super().allow_request(request, view)
