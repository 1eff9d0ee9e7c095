"""Budgets: how often a user may drive each input path, the socket and the API together.

Every path a user can drive at the server's expense (a send, a click, a settings change, an
ask answer, a feedback write, a search, an upload) spends from a budget of its own: a token
bucket per user (``token_bucket``; in Redis across processes when it is configured, else in
this process). A budget's rate is DRF's ``DEFAULT_THROTTLE_RATES[name]`` (set from the
environment as ``<NAME>_THROTTLE_RATE``), so an operator sets every rate in one place; the
API's throttle (``BudgetThrottle``) and the socket's handlers (``sessions_app.limits``) take
from the same bucket, so neither path goes around the other.

A refusal comes before any work is queued for the request: 429 with ``Retry-After`` over
HTTP, an ``{error}`` ack saying when to try again over the socket (``Budget.refusal``).
"""

import math
from dataclasses import dataclass, field
from typing import Any

from rest_framework.settings import api_settings
from rest_framework.throttling import BaseThrottle

from threads_app.recent_refusals import credential, recent_refusals
from threads_app.signals import budget_refused
from threads_app.token_bucket import Rate, TokenBucket


@dataclass(frozen=True)
class Budget:
    """One input path's budget: ``name`` is its throttle scope and its buckets' name,
    ``what`` names what it counts in a refusal ("messages", "clicks")."""

    name: str
    what: str
    bucket: TokenBucket = field(init=False, compare=False, repr=False)
    # The setting last read and its parse: parsed again only when the setting changed.
    _parsed: tuple[Any, Rate | None] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "bucket", TokenBucket(self.name))
        object.__setattr__(self, "_parsed", (object(), None))

    def rate(self) -> Rate | None:
        """The rate in force (the setting is read on every call, so a change applies at once;
        it is parsed only when it changed)."""
        setting = api_settings.DEFAULT_THROTTLE_RATES.get(self.name)
        seen, rate = self._parsed
        if setting is not seen:
            rate = Rate.parse(None if setting is None else str(setting))
            object.__setattr__(self, "_parsed", (setting, rate))
        return rate

    def take(self, user_pk: Any) -> float | None:
        """Spend one from the user's bucket (synchronous callers: a request thread). None if
        allowed, else the seconds until the budget allows it."""
        rate = self.rate()
        return None if rate is None else self.bucket.take(str(user_pk), rate)

    async def atake(self, user_pk: Any) -> float | None:
        """``take`` from the event loop: one Redis round trip, no thread."""
        rate = self.rate()
        return None if rate is None else await self.bucket.atake(str(user_pk), rate)

    async def agive_back(self, user_pk: Any) -> None:
        """The user's socket left this process: what it took from Redis and did not spend
        goes back (``TokenBucket.agive_back``)."""
        rate = self.rate()
        if rate is not None:
            await self.bucket.agive_back(str(user_pk), rate)

    def refusal(self, wait: float) -> str:
        """What a refused client is told."""
        return f"too many {self.what}: the rate is limited; try again in {math.ceil(wait)} s"

    def reset(self) -> None:
        self.bucket.reset()


SENDS = Budget("sends", "messages")
CLICKS = Budget("clicks", "action clicks")
SETTINGS_CHANGES = Budget("settings", "settings changes")
ASK_ANSWERS = Budget("ask_answers", "answers")
FEEDBACK = Budget("feedback", "feedback writes")
SEARCHES = Budget("searches", "searches")
UPLOADS = Budget("uploads", "uploads")

ALL = (SENDS, CLICKS, SETTINGS_CHANGES, ASK_ANSWERS, FEEDBACK, SEARCHES, UPLOADS)


async def give_back_all(user_pk: Any) -> None:
    """A socket of the user left this process: every budget's unspent allowance goes back."""
    for budget in ALL:
        await budget.agive_back(user_pk)


def reset_all() -> None:
    """Fill every user's buckets again (tests: a flushed database hands user pks out again)."""
    for budget in ALL:
        budget.reset()
    recent_refusals.clear()


class BudgetThrottle(BaseThrottle):
    """A DRF throttle that spends from ``budget``; subclasses name theirs. An anonymous
    request is not counted here (the view's authentication refuses it). A refusal is
    remembered with the request's credential (``recent_refusals``), so its repeats are
    refused before Django (``chatproject.budget_gate``)."""

    budget: Budget
    # False where the route also serves requests this budget does not count (a plain thread
    # list beside a search): their repeats must not be refused with the counted ones.
    refuses_whole_route = True

    def __init__(self) -> None:
        self._wait: float | None = None

    def allow_request(self, request: Any, view: Any) -> bool:
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated:
            return True
        self._wait = self.budget.take(user.pk)
        if self._wait is None:
            return True
        budget_refused.send(sender=type(self), budget=self.budget.name)
        if self.refuses_whole_route:
            self._remember(request, self._wait)
        return False

    @staticmethod
    def _remember(request: Any, wait: float) -> None:
        meta = getattr(request, "META", None) or {}
        who = credential(
            meta.get("HTTP_AUTHORIZATION", "").encode("latin-1"),
            meta.get("HTTP_COOKIE", "").encode("latin-1"),
        )
        if who is not None:
            recent_refusals.remember(request.method, request.path, who, wait)

    def wait(self) -> float | None:
        return self._wait
