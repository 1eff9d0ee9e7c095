"""Repeats of a request a budget just refused are answered 429 in the ASGI layer, before
Django (``chatproject.budget_gate``, ``threads_app.recent_refusals``): only the same
credential on the same route, and only for as long as the refusal's wait."""

import asyncio
import time
from types import SimpleNamespace
from typing import Any

import pytest

from chatproject.budget_gate import BudgetGate
from threads_app import budgets
from threads_app.recent_refusals import recent_refusals


class FeedbackThrottle(budgets.BudgetThrottle):
    budget = budgets.FEEDBACK


@pytest.fixture
def one_a_second(settings):
    settings.REDIS_URL = ""
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"feedback": "1/s"}}


def request(pk: str, *, cookie: str = "", token: str = "", path: str = "/api/feedback") -> SimpleNamespace:
    meta = {"HTTP_COOKIE": cookie} | ({"HTTP_AUTHORIZATION": f"Token {token}"} if token else {})
    return SimpleNamespace(
        user=SimpleNamespace(pk=pk, is_authenticated=True), META=meta, method="PUT", path=path
    )


def through_gate(
    *, cookie: str = "", token: str = "", path: str = "/api/feedback", method: str = "PUT"
) -> tuple[bool, list[Any]]:
    """(whether the app behind the gate was called, what the gate sent)."""
    reached, sent = [], []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        reached.append(scope)

    async def send(message: Any) -> None:
        sent.append(message)

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b""}

    headers = [(b"cookie", cookie.encode())] + (
        [(b"authorization", f"Token {token}".encode())] if token else []
    )
    scope = {"type": "http", "method": method, "path": path, "headers": headers}
    asyncio.run(BudgetGate(app)(scope, receive, send))
    return bool(reached), sent


def test_a_refused_session_is_answered_at_the_gate_until_its_wait_is_over(one_a_second):
    throttle = FeedbackThrottle()
    mine = "sessionid=abc; csrftoken=x"
    assert throttle.allow_request(request("gate-1", cookie=mine), None)
    assert through_gate(cookie=mine)[0]  # nothing refused yet
    assert not throttle.allow_request(request("gate-1", cookie=mine), None)
    reached, sent = through_gate(cookie=mine)
    assert not reached
    start, body = sent
    assert start["status"] == 429 and (b"retry-after", b"1") in start["headers"]
    assert body["body"] == b'{"detail": "Request was throttled. Expected available in 1 second."}'
    # Another session, another route, no credential: Django decides.
    assert through_gate(cookie="sessionid=other")[0]
    assert through_gate(cookie=mine, path="/api/project/action")[0]
    assert through_gate()[0]
    recent_refusals.clear()
    assert through_gate(cookie=mine)[0]


def test_a_token_is_the_credential_when_the_request_carries_one(one_a_second):
    throttle = FeedbackThrottle()
    assert throttle.allow_request(request("gate-2", token="t1", cookie="sessionid=abc"), None)
    assert not throttle.allow_request(request("gate-2", token="t1", cookie="sessionid=abc"), None)
    assert not through_gate(token="t1")[0]
    assert not through_gate(token="t1", cookie="sessionid=zzz")[0]
    # DRF would authenticate the token first: the same cookie with another token is not it.
    assert through_gate(token="t2", cookie="sessionid=abc")[0]
    assert through_gate(cookie="sessionid=abc")[0]


def test_the_gate_forgets_a_refusal_when_its_wait_is_over(settings):
    settings.REDIS_URL = ""
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"feedback": "20/s"}}
    throttle = FeedbackThrottle()
    while throttle.allow_request(request("gate-3", cookie="sessionid=q"), None):
        pass
    assert not through_gate(cookie="sessionid=q")[0]
    time.sleep(0.06)  # a token every 50 ms
    assert through_gate(cookie="sessionid=q")[0]


def test_a_refused_search_leaves_the_plain_list_of_its_route_to_django(settings):
    from threads_app.throttling import SearchThrottle

    settings.REDIS_URL = ""
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"searches": "1/s"}}
    search = SimpleNamespace(
        user=SimpleNamespace(pk="gate-search", is_authenticated=True),
        META={"HTTP_COOKIE": "sessionid=s1"},
        method="GET",
        path="/api/threads/",
        query_params={"search": "ocelot"},
    )
    view = SimpleNamespace(action="list")
    assert SearchThrottle().allow_request(search, view)
    assert not SearchThrottle().allow_request(search, view)
    reached, _sent = through_gate(cookie="sessionid=s1", path="/api/threads/", method="GET")
    assert reached  # a list without a search spends nothing, so the gate must not refuse it
