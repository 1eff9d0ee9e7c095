"""The budget model: one bucket per user and input path, shared by the API's throttle and the
socket's ``spend``, each path counted apart."""

import asyncio
from types import SimpleNamespace

import pytest

from sessions_app import limits
from threads_app import budgets


@pytest.fixture
def two_a_second(settings):
    settings.REDIS_URL = ""
    rates = {budget.name: "2/s" for budget in budgets.ALL}
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}


def test_every_budget_has_a_rate_in_the_settings():
    assert all(budget.rate() is not None for budget in budgets.ALL), [
        budget.name for budget in budgets.ALL if budget.rate() is None
    ]


def test_the_throttle_and_the_socket_spend_from_one_bucket(two_a_second):
    class ClickThrottle(budgets.BudgetThrottle):
        budget = budgets.CLICKS

    user = SimpleNamespace(pk="shared-1", is_authenticated=True)
    throttle = ClickThrottle()
    assert throttle.allow_request(SimpleNamespace(user=user), None)
    asyncio.run(limits.spend(budgets.CLICKS, user))
    assert not throttle.allow_request(SimpleNamespace(user=user), None)
    with pytest.raises(limits.OverBudget) as refused:
        asyncio.run(limits.spend(budgets.CLICKS, user))
    assert "too many action clicks" in str(refused.value) and "try again in 1 s" in str(refused.value)


def test_each_path_and_each_user_counts_apart(two_a_second):
    alice = SimpleNamespace(pk="apart-1", is_authenticated=True)
    bob = SimpleNamespace(pk="apart-2", is_authenticated=True)
    for _ in range(2):
        asyncio.run(limits.spend(budgets.SEARCHES, alice))
    with pytest.raises(limits.OverBudget):
        asyncio.run(limits.spend(budgets.SEARCHES, alice))
    asyncio.run(limits.spend(budgets.SETTINGS_CHANGES, alice))  # another path
    asyncio.run(limits.spend(budgets.SEARCHES, bob))  # another user


def test_a_budget_switched_off_never_refuses(settings):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"clicks": "off"}}
    user = SimpleNamespace(pk="off-1", is_authenticated=True)
    for _ in range(200):
        asyncio.run(limits.spend(budgets.CLICKS, user))


def test_anonymous_requests_are_left_to_authentication(two_a_second):
    class SearchThrottle(budgets.BudgetThrottle):
        budget = budgets.SEARCHES

    anonymous = SimpleNamespace(user=SimpleNamespace(pk=None, is_authenticated=False))
    assert all(SearchThrottle().allow_request(anonymous, None) for _ in range(10))
