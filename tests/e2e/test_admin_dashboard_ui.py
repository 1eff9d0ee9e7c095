"""The admin's live dashboard in Chromium while a small load runs: a hooks-API daphne and an
engine-runtime daphne, each answering a few ChatClients' sends. The page refreshes itself,
its uPlot charts draw (canvases, non-zero turn counts), both processes are listed alive, it
raises no CSP violation and axe finds nothing, in the admin's light and dark schemes. The
screenshot goes to ``test-artifacts/screenshots/admin-dashboard.png``."""

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from playwright.async_api import Browser, Page, expect

from tests.e2e.test_admin_csp_ui import VIOLATIONS
from tests.e2e.test_web_ui import DESKTOP, SCREENSHOTS, TIMEOUT_MS
from tests.support.client import ChatClient, user_cookie

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

AXE = (Path(__file__).parent / "vendor" / "axe-core" / "axe.min.js").read_text()
FAST = {"DASHBOARD_PUBLISH_EVERY": "0.5"}
# The series' colours in dashboard.js: hooks-API and engine turns; task_end p50 and p95.
SERIES_TURNS = [[0x2B, 0x6C, 0xB0], [0x2F, 0x85, 0x5A]]
SERIES_LATENCY = [[0x2B, 0x6C, 0xB0], [0x9B, 0x2C, 0x2C]]
# How many pixels of a canvas are near one of the colours.
COLOURED = """([selector, colours]) => {
    const canvas = document.querySelector(selector);
    const data = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
    let near = 0;
    for (let i = 0; i < data.length; i += 4) {
        if (data[i + 3] < 200) continue;
        if (colours.some(([r, g, b]) => Math.abs(data[i] - r) + Math.abs(data[i + 1] - g) + Math.abs(data[i + 2] - b) < 40)) near++;
    }
    return near;
}"""


async def axe_violations(page: Page) -> list[str]:
    if not await page.evaluate("typeof window.axe === 'object'"):
        await page.evaluate(AXE)
    results = await page.evaluate("axe.run(document, {resultTypes: ['violations']})")
    return [
        f"{violation['id']} ({violation['impact']}): {node['target']} {node.get('failureSummary', '')}"
        for violation in results["violations"]
        for node in violation["nodes"]
    ]


async def load(url: str, user: Any, text: str, sends: int) -> None:
    """One bench-like client: connect, send ``sends`` messages one after another, wait for
    each answer's end, disconnect."""
    client = ChatClient(url, await user_cookie(url, user))
    await client.start()
    try:
        for number in range(sends):
            ended = sum(1 for name, _ in client.events if name == "task_end")
            answer = await client.send(f"{text} {number}")
            assert "error" not in answer, answer
            await client.wait_for(lambda c, n=ended: sum(1 for name, _ in c.events if name == "task_end") > n)
    finally:
        await client.disconnect()


async def number(page: Page, selector: str) -> float:
    return float((await page.locator(selector).inner_text()).split()[0])


async def test_the_dashboard_draws_a_running_load(
    browser: Browser, server_factory, make_user, django_user_model, tmp_path
):
    hooks = server_factory.start(**FAST)
    engine = server_factory.start(
        CHAT_APP="sessions_app.default_app", ECHO_STATE_DIR=str(tmp_path / "echo"), **FAST
    )
    name = f"dash-boss-{uuid.uuid4().hex[:6]}"
    await sync_to_async(django_user_model.objects.create_superuser)(username=name, password="pw-for-tests-1")
    users = [make_user() for _ in range(4)]
    # Two clients per process, eight sends each: 32 turns, half of each app kind.
    running = [
        asyncio.ensure_future(load(hooks.url, users[0], "hi", 8)),
        asyncio.ensure_future(load(hooks.url, users[1], "hello", 8)),
        asyncio.ensure_future(load(engine.url, users[2], "!slow 0.02\nbench words", 8)),
        asyncio.ensure_future(load(engine.url, users[3], "!slow 0.02\nmore words", 8)),
    ]

    context = await browser.new_context(viewport={**DESKTOP, "height": 1400})
    context.set_default_timeout(TIMEOUT_MS)
    await context.add_init_script(VIOLATIONS)
    page = await context.new_page()
    try:
        await page.goto(f"{hooks.url}/admin/login/?next=/admin/")
        await page.fill("#id_username", name)
        await page.fill("#id_password", "pw-for-tests-1")
        await page.click("input[type=submit]")
        await page.get_by_role("link", name="Live dashboard").click()
        await expect(page.locator("#content h1")).to_have_text("Live dashboard")

        # Turns counted while the load runs: the page fetched them on its own.
        await expect(page.locator("#total-turns-hour")).not_to_have_text("-")
        await page.wait_for_function(
            "() => Number(document.getElementById('total-turns-hour').textContent) >= 4"
        )
        await expect(page.locator("#chart-turns canvas")).to_have_count(1)
        await expect(page.locator("#chart-latency canvas")).to_have_count(1)
        rows = page.locator("#dashboard-processes tbody tr")
        for server in (hooks, engine):
            row = rows.filter(has_text=f":{server.process.pid}")
            await expect(row).to_have_count(1)
            await expect(row.locator(".tether-state")).to_have_text("alive")
        await page.wait_for_function(
            "() => Number(document.querySelector('.tether-dashboard').dataset.refreshes) >= 3"
        )
        assert await number(page, "#total-processes") >= 2
        # Both charts drew their series: pixels of the turns' and the latencies' colours (the
        # hooks-API and engine lines, the p50 and p95 points), not only the grid.
        for chart, colours in (("chart-turns", SERIES_TURNS), ("chart-latency", SERIES_LATENCY)):
            drawn = await page.evaluate(COLOURED, [f"#{chart} canvas", colours])
            assert drawn > 20, (chart, drawn)
        await asyncio.gather(*running)
        await page.wait_for_function(
            "() => Number(document.getElementById('total-turns-hour').textContent) >= 32"
        )
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        await page.screenshot(path=str(SCREENSHOTS / "admin-dashboard.png"), full_page=True)
        assert await page.evaluate("window.__csp") == []
        assert await axe_violations(page) == [], "axe, light scheme"
        await page.emulate_media(color_scheme="dark")
        await page.screenshot(path=str(SCREENSHOTS / "admin-dashboard-dark.png"), full_page=True)
        assert await axe_violations(page) == [], "axe, dark scheme"
        assert await page.evaluate("window.__csp") == []
    finally:
        for task in running:
            task.cancel()
        await context.close()
