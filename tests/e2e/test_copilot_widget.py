"""Chainlit's copilot widget (``<prefix>/copilot/index.js`` of the installed Chainlit build,
served by ``chainlit_frontend``) mounted by a page of another origin
(``tests/support/copilot_host``, served on another port), in Debian's Chromium, as Chainlit's
docs embed it: ``mountChainlitWidget({chainlitServer, accessToken})``. The widget signs in
with the access token (``/auth/jwt``: a Tether API token), reads the API and opens its socket
across origins (CORS from ``chainlit_frontend.cors``), and a message sent from it gets the
app's reply, shown once. The same page on an origin the server does not trust signs nobody
in and opens no socket: the browser refuses its cross-origin reads, the server its socket."""

from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from playwright.async_api import Browser, Page, WebSocket, expect

from sessions_app.tokens import issue
from tests.e2e.test_web_ui import DESKTOP, SCREENSHOTS
from tests.support.chainlit_build import chainlit_build_dir
from tests.support.server import LiveServer
from tests.support.static_site import StaticSite

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

HOST_PAGE = Path(__file__).resolve().parents[1] / "support" / "copilot_host"
TIMEOUT_MS = 20_000


@pytest.fixture(scope="module")
def host_sites() -> Iterator[tuple[StaticSite, StaticSite]]:
    """The host page on two origins: one the server trusts, one it does not."""
    with StaticSite(HOST_PAGE) as trusted, StaticSite(HOST_PAGE) as untrusted:
        yield trusted, untrusted


# Per app kind: the app and its reply to REQUEST.
APPS = {
    "hooks": ("tests.apps.chainlit_frontend_app", "You said: hello from another site"),
    "engine": ("sessions_app.default_app", "Echo #1: hello from another site"),
}
REQUEST = "hello from another site"


@pytest.fixture(scope="module")
def copilot_servers(server_factory, host_sites, tmp_path_factory) -> Callable[[str], LiveServer]:
    """``copilot_servers(kind)``: the module's server of that app kind, trusting the first site."""
    trusted, _ = host_sites
    started: dict[str, LiveServer] = {}

    def server_of(kind: str) -> LiveServer:
        if kind not in started:
            env = {
                "CHAT_APP": APPS[kind][0],
                "CHAINLIT_FRONTEND_DIR": str(chainlit_build_dir()),
                "CSRF_TRUSTED_ORIGINS": trusted.origin,
            }
            if kind == "engine":
                env["ECHO_STATE_DIR"] = str(tmp_path_factory.mktemp("echo"))
            started[kind] = server_factory.start(**env)
        return started[kind]

    return server_of


@dataclass
class HostTab:
    """The host page's tab and what it saw of the Tether server."""

    page: Page
    server: str = "(none yet)"  # the Tether server's origin, once the test picks it
    errors: list[str] = field(default_factory=list)
    answered: list[str] = field(default_factory=list)  # "<status> <method> <url>"
    failed: list[str] = field(default_factory=list)  # "<method> <url> <error>"
    sockets: list[WebSocket] = field(default_factory=list)

    def watch(self) -> None:
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))
        self.page.on(
            "response",
            lambda r: (
                self.answered.append(f"{r.status} {r.request.method} {r.url}")
                if r.url.startswith(self.server)
                else None
            ),
        )
        self.page.on(
            "requestfailed",
            lambda r: (
                self.failed.append(f"{r.method} {r.url} {r.failure}")
                if r.url.startswith(self.server)
                else None
            ),
        )
        self.page.on("websocket", lambda socket: self.sockets.append(socket))

    def evidence(self) -> str:
        sockets = [(s.url, s.is_closed()) for s in self.sockets]
        return "\n".join(
            [
                f"page errors: {self.errors}",
                f"sockets: {sockets}",
                "answered:",
                *self.answered,
                "failed:",
                *self.failed,
            ]
        )


@pytest.fixture
async def host_tab(browser: Browser) -> AsyncIterator[HostTab]:
    context = await browser.new_context(viewport=DESKTOP)
    page = await context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    tab = HostTab(page)
    tab.watch()
    yield tab
    await context.close()


async def _open_socket(page: Page, server: LiveServer) -> str:
    """Open a WebSocket to the server's socket path from the page: "opened" or "refused"."""
    url = server.url.replace("http://", "ws://") + settings.CHAINLIT_PATH_PREFIX
    return str(
        await page.evaluate(
            """(url) => new Promise((resolve) => {
                const socket = new WebSocket(url);
                socket.onopen = () => { socket.close(); resolve("opened"); };
                socket.onerror = () => resolve("refused");
            })""",
            f"{url}/ws/socket.io/?EIO=4&transport=websocket",
        )
    )


def _host_url(site: StaticSite, server: LiveServer, token: str) -> str:
    return f"{site.origin}/index.html#server={server.url}{settings.CHAINLIT_PATH_PREFIX}&token={token}"


@pytest.mark.parametrize("kind", sorted(APPS))
async def test_the_copilot_on_a_trusted_origin_signs_in_and_chats(
    kind, host_tab, host_sites, copilot_servers, make_user
):
    trusted, _ = host_sites
    copilot_server = copilot_servers(kind)
    host_tab.server = copilot_server.url
    user = make_user()
    token = (await sync_to_async(issue)(user)).key
    page = host_tab.page
    await page.goto(_host_url(trusted, copilot_server, token))
    await page.click("#chainlit-copilot-button")
    composer = page.locator("#chainlit-copilot-chat #chat-input")  # in the widget's open shadow root
    await expect(composer).to_be_visible()
    await composer.fill(REQUEST)
    submit = page.locator("#chainlit-copilot-chat #chat-submit")
    try:
        await expect(submit).to_be_enabled()  # once its socket is up
    except AssertionError as error:
        raise AssertionError(host_tab.evidence()) from error
    await composer.press("Enter")
    replies = page.locator('#chainlit-copilot-chat [data-step-type="assistant_message"]')
    await expect(replies.last).to_contain_text(APPS[kind][1])
    await page.wait_for_timeout(500)  # late events land
    users = page.locator('#chainlit-copilot-chat [data-step-type="user_message"]')
    shown = [(await users.nth(i).inner_text()).strip() for i in range(await users.count())]
    assert shown == [REQUEST], (shown, host_tab.evidence())
    assert await replies.count() == 1, host_tab.evidence()
    # Signed in with the token, reading across origins, over the client's default transports.
    assert any(a.startswith("200 POST") and a.endswith("/auth/jwt") for a in host_tab.answered), (
        host_tab.evidence()
    )
    assert any("transport=polling" in a and a.startswith("200 GET") for a in host_tab.answered), (
        host_tab.evidence()
    )
    assert any("transport=websocket" in s.url for s in host_tab.sockets), host_tab.evidence()
    assert host_tab.failed == [] and host_tab.errors == [], host_tab.evidence()
    assert await _open_socket(page, copilot_server) == "opened"  # the same probe as below
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(SCREENSHOTS / f"copilot-another-origin-{kind}.png"))


async def test_the_copilot_on_an_untrusted_origin_gets_nothing(
    host_tab, host_sites, copilot_servers, make_user
):
    _, untrusted = host_sites
    copilot_server = copilot_servers("hooks")
    host_tab.server = copilot_server.url
    user = make_user()
    token = (await sync_to_async(issue)(user)).key
    page = host_tab.page
    await page.goto(_host_url(untrusted, copilot_server, token))
    await page.click("#chainlit-copilot-button")  # the script itself loads: a plain <script src>
    await page.wait_for_timeout(3000)
    # The browser let the page read nothing: the sign-in's preflight got no CORS answer.
    assert any("/auth/jwt" in f for f in host_tab.failed), host_tab.evidence()
    assert not any(a.startswith("200 POST") and a.endswith("/auth/jwt") for a in host_tab.answered), (
        host_tab.evidence()
    )
    # Nothing it sends reaches the app: no socket was opened for it.
    assert not any("transport=polling" in a and a.startswith("200") for a in host_tab.answered), (
        host_tab.evidence()
    )
    assert not any(s for s in host_tab.sockets if "socket.io" in s.url and not s.is_closed()), (
        host_tab.evidence()
    )
    # The page itself, read directly, is refused too.
    outcome = await page.evaluate(
        """async (url) => {
            try { await fetch(url, { credentials: "include" }); return "read"; }
            catch (e) { return String(e); }
        }""",
        f"{copilot_server.url}{settings.CHAINLIT_PATH_PREFIX}/user",
    )
    assert outcome.startswith("TypeError"), outcome
    # And a socket it opens itself is refused at the handshake (its Origin is not trusted).
    assert await _open_socket(page, copilot_server) == "refused"
