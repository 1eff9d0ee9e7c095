"""The socket's side of the budgets (``threads_app.budgets``): the same buckets as the API's
throttles, taken from the event loop (one Redis round trip, no thread), refused before any
work is queued."""

from typing import Any

from threads_app.budgets import SENDS, Budget


class OverBudget(Exception):
    """The user spent this budget; ``str()`` says when to try again."""

    def __init__(self, budget: Budget, wait: float) -> None:
        super().__init__(budget.refusal(wait))
        self.budget = budget
        self.wait = wait


async def spend(budget: Budget, user: Any) -> None:
    """Take one from the user's bucket of ``budget``, or raise OverBudget."""
    wait = await budget.atake(user.pk)
    if wait is not None:
        raise OverBudget(budget, wait)


async def wait_before_next_send(user: Any) -> float | None:
    """None if the user may send now, else the seconds until the budget allows it."""
    return await SENDS.atake(user.pk)
