"""The admin's live dashboard (sessions_app.dashboard): staff only; its JSON moves with real
turns of real daphnes, hooks-API and engine apps, whose processes publish their samples
(sessions_app.dashboard_samples) to the database this test reads through the view; a failed
send is listed with links to admin pages that open; the per-minute ring closes minutes and
the quantiles read from buckets are Prometheus's."""

import asyncio
import json
import time
import uuid
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from sessions_app import metrics
from sessions_app.dashboard import quantile
from sessions_app.dashboard_samples import BOUNDS, MinuteRing
from sessions_app.models import ProcessSamples
from tests.support.client import ChatClient, user_cookie

pytestmark = [pytest.mark.django_db(transaction=True)]

DATA = "/admin/tether/dashboard/data.json"
PAGE = "/admin/tether/dashboard/"
FAST = {"DASHBOARD_PUBLISH_EVERY": "0.3"}


@pytest.fixture
def staff_client(django_user_model) -> Client:
    """A superuser: the failures' links are change pages, which need view permissions."""
    staff = django_user_model.objects.create_superuser(
        username=f"ops-{uuid.uuid4().hex[:6]}", password="pw-1-x"
    )
    client = Client()
    client.force_login(staff)
    return client


def test_the_dashboard_is_for_staff_only(django_user_model, staff_client):
    anonymous = Client()
    for url in (PAGE, DATA):
        response = anonymous.get(url)
        assert response.status_code == 302 and "/admin/login/" in response["Location"], (url, response)
    user = django_user_model.objects.create_user(username=f"plain-{uuid.uuid4().hex[:6]}", password="pw-1-x")
    signed_in = Client()
    signed_in.force_login(user)
    for url in (PAGE, DATA):
        response = signed_in.get(url)
        assert response.status_code == 302 and "/admin/login/" in response["Location"], (url, response)

    # Staff, with no permission on any model: the dashboard is theirs too.
    staff = django_user_model.objects.create_user(
        username=f"st-{uuid.uuid4().hex[:6]}", password="p", is_staff=True
    )
    only_staff = Client()
    only_staff.force_login(staff)
    assert only_staff.get(DATA).status_code == 200

    page = staff_client.get(PAGE)
    assert page.status_code == 200
    body = page.content.decode()
    assert 'type="module" src="/static/tether/admin/dashboard.js"' in body, body[:2000]
    assert 'data-url="/admin/tether/dashboard/data.json"' in body
    # The admin's policy, unrelaxed: no inline script in the page.
    assert page["Content-Security-Policy"].startswith("default-src 'self'; script-src 'self';")
    assert "<script>" not in body and " style=" not in body
    data = staff_client.get(DATA)
    assert data.status_code == 200 and set(data.json()) >= {"processes", "series", "failures", "totals"}
    index = staff_client.get("/admin/").content.decode()
    assert 'href="/admin/tether/dashboard/"' in index, index[:3000]


def test_quantiles_are_read_from_buckets_as_prometheus_does():
    empty = [0.0] * len(BOUNDS)
    assert quantile(0.95, empty) is None
    # 10 observations in (0.1, 0.25]: the median is halfway through that bucket.
    ten = [0.0 if bound < 0.25 else 10.0 for bound in BOUNDS]
    assert quantile(0.5, ten) == pytest.approx(0.175)
    # Everything above the last finite bound: the quantile is that bound.
    top = [0.0] * (len(BOUNDS) - 1) + [4.0]
    assert quantile(0.95, top) == BOUNDS[-2]


def test_the_ring_closes_each_minute_with_the_counters_change():
    ring = MinuteRing()
    start = (time.time() // 60) * 60
    first = ring.sample(start + 1)
    assert len(first) == 1 and first[0]["turns"] == {"hooks": 0, "engine": 0}
    metrics.turns.labels(metrics.HOOKS, "replied").inc()
    metrics.turns.labels(metrics.ENGINE, "error").inc()
    metrics.accept_to_task_end.labels(metrics.HOOKS).observe(0.2)
    during = ring.sample(start + 30)
    assert during[-1]["turns"] == {"hooks": 1, "engine": 1} and during[-1]["errors"] == 1, during
    after = ring.sample(start + 61)
    assert [m["t"] for m in after] == [start, start + 60], after
    closed, current = after
    assert closed["turns"] == {"hooks": 1, "engine": 1} and closed["task_end"][-1] == 1, closed
    assert current["turns"] == {"hooks": 0, "engine": 0} and current["errors"] == 0, current
    for minute in range(2, 70):  # bounded: an hour of minutes
        ring.sample(start + 60 * minute + 1)
    assert len(ring.sample(start + 60 * 70 + 1)) == 61


async def dashboard(client: Client) -> dict[str, Any]:
    response = await sync_to_async(client.get)(DATA)
    assert response.status_code == 200, response
    data: dict[str, Any] = json.loads(response.content)
    return data


def of_pid(data: dict[str, Any], pid: int) -> dict[str, Any] | None:
    return next((p for p in data["processes"] if p["name"].endswith(f":{pid}")), None)


def turns(data: dict[str, Any], kind: str) -> float:
    return float(sum(data["series"][f"turns_{kind}"]))


async def own_turns(data: dict[str, Any], pid: int, kind: str, timeout: float = 10) -> float:
    """The turns of one process's published minutes once there are some: the series adds up
    every process, and in a full run other tests' servers publish theirs at any moment."""
    process = of_pid(data, pid)
    assert process is not None, data["processes"]
    deadline = time.monotonic() + timeout
    while True:
        row = await ProcessSamples.objects.aget(address=process["address"])
        counted = float(sum(minute.get("turns", {}).get(kind, 0) for minute in row.minutes))
        if counted or time.monotonic() > deadline:
            return counted
        await asyncio.sleep(0.2)


async def wait_for_dashboard(client: Client, check: Any, timeout: float = 10) -> dict[str, Any]:
    """The dashboard's JSON once ``check`` holds for it (the evidence if it never does)."""
    seen: dict[str, Any] = {}

    async def holds() -> bool:
        nonlocal seen
        seen = await dashboard(client)
        return bool(check(seen))

    deadline = time.monotonic() + timeout
    while not await holds():
        if time.monotonic() > deadline:
            raise AssertionError(json.dumps(seen, indent=1)[:6000])
        await asyncio.sleep(0.2)
    return seen


async def test_a_hooks_api_turn_moves_the_dashboard(server_factory, make_user, staff_client):
    server = server_factory.start(**FAST)
    pid = server.process.pid
    client = ChatClient(server.url, await user_cookie(server.url, make_user()))
    await client.start()
    try:
        before = await wait_for_dashboard(staff_client, lambda d: (p := of_pid(d, pid)) and p["sockets"] == 1)
        process = of_pid(before, pid)
        assert process is not None and process["alive"] and not process["draining"], process
        assert process["sessions"] >= 1 and before["totals"]["sockets"] >= 1, process
        answer = await client.send("hello dashboard")
        assert "error" not in answer, answer
        await client.wait_for(lambda c: "echo: hello dashboard" in c.texts())
        after = await wait_for_dashboard(staff_client, lambda d: turns(d, "hooks") > turns(before, "hooks"))
    finally:
        await client.disconnect()
    assert await own_turns(after, pid, "hooks") == 1, after["series"]
    assert any(v is not None and 0 < v < 10 for v in after["series"]["task_end_p95"]), after["series"]
    assert any(v is not None and v > 0 for v in after["series"]["first_token_p95"]), after["series"]
    gone = await wait_for_dashboard(staff_client, lambda d: (p := of_pid(d, pid)) and p["sockets"] == 0)
    assert of_pid(gone, pid)["alive"]  # type: ignore[index]


async def test_an_engine_turn_and_its_failure_show_on_the_dashboard(
    server_factory, make_user, staff_client, tmp_path
):
    server = server_factory.start(
        CHAT_APP="sessions_app.default_app", ECHO_STATE_DIR=str(tmp_path / "echo"), **FAST
    )
    pid = server.process.pid
    before = await wait_for_dashboard(staff_client, lambda d: of_pid(d, pid) is not None)
    client = ChatClient(server.url, await user_cookie(server.url, make_user()))
    await client.start()
    try:
        answer = await client.send("!slow 0.05\nthree little words")
        assert "error" not in answer, answer
        await client.wait_for(lambda c: any(r.endswith("three little words") for r in c.replies()))
        moved = await wait_for_dashboard(staff_client, lambda d: turns(d, "engine") > turns(before, "engine"))
        assert await own_turns(moved, pid, "engine") == 1, moved["series"]
        assert of_pid(moved, pid)["engine_runs"] >= 1, of_pid(moved, pid)  # type: ignore[index]
        failing = await client.send("!fail")
        assert "error" not in failing, failing
        failed = await wait_for_dashboard(
            staff_client, lambda d: any(f["text"] == "!fail" for f in d["failures"])
        )
    finally:
        await client.disconnect()
    failure = next(f for f in failed["failures"] if f["text"] == "!fail")
    assert failure["outcome"] == "error" or failure["state"] == "failed", failure
    errors = await wait_for_dashboard(staff_client, lambda d: sum(d["series"]["errors"]) >= 1)
    assert sum(errors["series"]["errors"]) >= 1
    for link in (failure["thread_url"], failure["send_url"]):
        page = await sync_to_async(staff_client.get)(link)
        assert page.status_code == 200, (link, page)
    assert failure["thread"] in failure["thread_url"] and failure["send"] in failure["send_url"]


def test_the_dashboard_speaks_french_to_a_french_browser(staff_client):
    staff_client.defaults["HTTP_ACCEPT_LANGUAGE"] = "fr"
    page = staff_client.get(PAGE).content.decode()
    assert "Tableau de bord en direct" in page and "Tours en attente" in page, page[:3000]
    assert 'data-alive="vivant"' in page
    assert "Tableau de bord en direct" in staff_client.get("/admin/").content.decode()
