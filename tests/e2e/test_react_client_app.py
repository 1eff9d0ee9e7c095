"""A react-client app (``tests/support/react_client_app``: ``@chainlit/react-client`` from npm,
built by esbuild in the test run) in Debian's Chromium, on a page of its own origin as a
Chainlit user's app would be, talking to Tether with the client's default transports (long-
polling, then the upgrade to WebSocket) for both kinds of app: it signs in with the client's
``passwordAuth``, connects, sends, shows the reply growing token by token, and after a reload
resumes the thread, every message shown once. Only the server URL names Tether; its origin is
trusted with ``CSRF_TRUSTED_ORIGINS``. On a failure the socket's events are printed."""

from collections.abc import AsyncIterator, Iterator

import pytest
from django.conf import settings
from playwright.async_api import Browser, Page, expect
from playwright.async_api import TimeoutError as PlaywrightTimeout

from tests.e2e.test_web_ui import DESKTOP, SCREENSHOTS
from tests.support.react_client_build import react_client_app_dir
from tests.support.server import LiveServer
from tests.support.static_site import StaticSite

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TIMEOUT_MS = 20_000
# Per app kind: the app, a message whose reply streams slowly, and that reply once whole.
APPS = {
    "hooks": ("tests.apps.chainlit_frontend_app", "slow 6", "w0 w1 w2 w3 w4 w5"),
    "engine": (
        "sessions_app.default_app",
        "!slow 0.25\none two three four five six",
        "Echo #1: one two three four five six",
    ),
}
# A second message in the resumed thread, and its reply.
AFTER_RELOAD = {"hooks": ("again", "You said: again"), "engine": ("again", "Echo #2: again")}


@pytest.fixture(scope="module")
def app_site() -> Iterator[StaticSite]:
    with StaticSite(react_client_app_dir()) as site:
        yield site


@pytest.fixture(scope="module", params=sorted(APPS))
def app_server(request, server_factory, app_site, tmp_path_factory) -> tuple[str, LiveServer]:
    kind = request.param
    env = {"CHAT_APP": APPS[kind][0], "CSRF_TRUSTED_ORIGINS": app_site.origin}
    if kind == "engine":
        env["ECHO_STATE_DIR"] = str(tmp_path_factory.mktemp("echo"))
    return kind, server_factory.start(**env)


class AppTab:
    """The app's tab, and what it shows and saw."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.errors: list[str] = []
        page.on("pageerror", lambda error: self.errors.append(str(error)))
        page.set_default_timeout(TIMEOUT_MS)

    async def shown(self) -> list[tuple[str, str]]:
        """Every top-level message on the page, in order: (type, text)."""
        return [
            (str(m[0]), str(m[1]).strip())
            for m in await self.page.eval_on_selector_all(
                "#messages li", "items => items.map(li => [li.dataset.type, li.textContent])"
            )
        ]

    async def evidence(self) -> str:
        events = await self.page.evaluate("window.__events || []")
        transports = await self.page.evaluate("window.__transports || []")
        shown = await self.shown()
        lines = [f"transports: {transports}", f"page errors: {self.errors}", f"shown: {shown}", "events:"]
        return "\n".join([*lines, *events])

    async def wait_connected(self) -> None:
        await expect(self.page.locator("#status")).to_have_attribute("data-connected", "true")

    async def send(self, text: str) -> None:
        await self.page.fill("#composer", text)
        await expect(self.page.locator("#send")).to_be_enabled()
        await self.page.click("#send")
        await expect(self.page.locator("#composer")).to_have_value("")


@pytest.fixture
async def tab(browser: Browser, app_server) -> AsyncIterator[AppTab]:
    context = await browser.new_context(viewport=DESKTOP)
    app_tab = AppTab(await context.new_page())
    yield app_tab
    await context.close()


async def _watch_growth(tab: AppTab, whole: str) -> list[str]:
    """The last assistant message's text at each change, until it is ``whole``."""
    seen: list[str] = []
    for _ in range(600):
        shown = [text for kind, text in await tab.shown() if kind == "assistant_message"]
        text = shown[-1] if shown else ""
        if text and (not seen or seen[-1] != text):
            seen.append(text)
        if text == whole:
            return seen
        await tab.page.wait_for_timeout(40)
    pytest.fail(f"the reply never became {whole!r}; seen {seen}\n{await tab.evidence()}")


async def test_a_react_client_app_streams_reloads_and_resumes(tab, app_server, app_site, make_user):
    kind, server = app_server
    _, text, reply = APPS[kind]
    user = make_user()
    url = f"{app_site.origin}/index.html?server={server.url}{settings.CHAINLIT_PATH_PREFIX}"
    page = tab.page
    await page.goto(url)
    await page.fill("#username", user.username)
    await page.fill("#password", user.raw_password)
    await page.click("#sign-in-button")
    await tab.wait_connected()
    # The client's defaults: long-polling first, then the upgrade.
    try:
        await page.wait_for_function("window.__transports.includes('websocket')", timeout=TIMEOUT_MS)
    except PlaywrightTimeout as timeout:
        raise AssertionError(f"no upgrade to WebSocket\n{await tab.evidence()}") from timeout
    assert await page.evaluate("window.__transports") == ["polling", "websocket"], await tab.evidence()

    await tab.send(text)
    seen = await _watch_growth(tab, reply)
    words = reply.split()
    # Several states in between: the reply grew on the page, one or a few tokens at a time.
    partial = [s for s in seen if s != reply and reply.startswith(s)]
    assert len({len(s.split()) for s in partial}) >= 3, (seen, await tab.evidence())
    assert all(len(s.split()) < len(words) for s in partial), seen
    await expect(page.locator("#status")).to_have_attribute("data-loading", "false")
    await page.wait_for_timeout(300)  # late events (the final update) land
    expected = [("user_message", text.strip()), ("assistant_message", reply)]
    assert await tab.shown() == expected, await tab.evidence()
    thread = await page.locator("#status").get_attribute("data-thread")
    assert thread, await tab.evidence()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(SCREENSHOTS / f"react-client-{kind}-streamed.png"))

    # A reload resumes the thread (the app keeps its id and sets it to resume, as Chainlit's
    # frontend does): the same messages, once each, and the thread goes on.
    await page.reload()
    await tab.wait_connected()
    await expect(page.locator("#messages li")).to_have_count(2)
    await page.wait_for_timeout(300)
    assert await tab.shown() == expected, await tab.evidence()
    assert await page.locator("#status").get_attribute("data-thread") == thread, await tab.evidence()

    again, again_reply = AFTER_RELOAD[kind]
    await tab.send(again)
    await expect(page.locator("#messages li").last).to_have_text(again_reply)
    await expect(page.locator("#status")).to_have_attribute("data-loading", "false")
    await page.wait_for_timeout(300)
    assert await tab.shown() == [*expected, ("user_message", again), ("assistant_message", again_reply)], (
        await tab.evidence()
    )
    assert tab.errors == [], await tab.evidence()
    await page.screenshot(path=str(SCREENSHOTS / f"react-client-{kind}-resumed.png"))
