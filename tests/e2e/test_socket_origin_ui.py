"""Cross-site WebSocket hijacking (issue 21, item 1), replayed in Debian's Chromium.

A signed-in user's browser opens a page served on another port of 127.0.0.1 (a small
``http.server`` of the test's own): the same *site* as Tether, so the browser sends the Lax
session cookie along with anything the page asks of Tether. The page opens a raw WebSocket to
Tether's ``/ws/socket.io/`` and, if it is let in, speaks Socket.IO to send a message as the
user. Tether must refuse the handshake and record nothing. The user's own chat page, in the
same browser, still connects and sends (the positive control), and a server that lists the
page's origin in ``CSRF_TRUSTED_ORIGINS`` lets the very same page send (so the page is a real
attack: what stops it is the Origin check alone).
"""

import json
import threading
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from playwright.async_api import Browser, Page, expect

from tests.e2e.test_web_ui import TIMEOUT_MS, Chat, _page_opener
from threads_app.models import AcceptedMessage

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

expect.set_options(timeout=TIMEOUT_MS)

# The page another port serves: a raw WebSocket to Tether, and the Socket.IO steps a client
# takes to send a message once it is in. ``window.attack.log`` is what happened, in order.
ATTACK_PAGE = """<!doctype html>
<title>another app on this host</title>
<script>
const config = %(config)s;
window.attack = { log: [], done: false };
const note = (line) => window.attack.log.push(line);
const ws = new WebSocket(config.url);
ws.onopen = () => note("open");
ws.onerror = () => note("error");
ws.onclose = (event) => { note(`close ${event.code}`); window.attack.done = true; };
ws.onmessage = (event) => {
  const frame = String(event.data);
  note(`received ${frame.slice(0, 120)}`);
  if (frame.startsWith("0{")) ws.send("40" + JSON.stringify(config.auth));
  else if (frame === "2") ws.send("3");
  else if (frame.startsWith("40{")) ws.send("421" + JSON.stringify(["client_message", config.message]));
  else if (frame.startsWith("431")) { note("acknowledged"); window.attack.done = true; }
};
</script>
"""


class AttackSite:
    """An HTTP server on another port of 127.0.0.1 serving :data:`ATTACK_PAGE`, aimed at the
    Tether server on :attr:`target_port` (set once it is known); it keeps the Cookie header of
    each request it gets."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.target_port = 0
        self.cookies: list[str] = []
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                site.cookies.append(self.headers.get("Cookie", ""))
                body = site.page().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def page(self) -> str:
        config = {
            "url": f"ws://127.0.0.1:{self.target_port}/ws/socket.io/?EIO=4&transport=websocket",
            "auth": {"sessionId": str(uuid.uuid4()), "clientType": "webapp", "userEnv": "{}"},
            "message": {"message": {"id": str(uuid.uuid4()), "output": self.text}},
        }
        return ATTACK_PAGE % {"config": json.dumps(config)}

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


class Visit:
    """The attack page open in the user's browser, and what the browser said of its socket."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.socket_events: list[str] = []
        page.on("websocket", self._watch)

    def _watch(self, ws: Any) -> None:
        self.socket_events.append(f"websocket {ws.url}")
        ws.on("socketerror", lambda error: self.socket_events.append(f"socketerror {error}"))
        ws.on("framereceived", lambda frame: self.socket_events.append(f"received {str(frame)[:120]}"))
        ws.on("close", lambda _: self.socket_events.append("close"))

    async def run(self, url: str) -> list[str]:
        """Open the page and wait until its socket closed or its message was acknowledged."""
        await self.page.goto(url)
        await self.page.wait_for_function("window.attack && window.attack.done", timeout=TIMEOUT_MS)
        log: list[str] = await self.page.evaluate("window.attack.log")
        return log

    def evidence(self, log: list[str], site: AttackSite, recorded: list[str]) -> str:
        return (
            f"\nthe page's socket: {log}\nwhat Chromium reported: {self.socket_events}"
            f"\nCookie headers the page's own server got: {site.cookies}\nmessages recorded: {recorded}"
        )


@sync_to_async
def recorded_texts(user: Any) -> list[str]:
    """The texts of every message accepted from ``user``, in order."""
    return list(
        AcceptedMessage.objects.filter(author=user).order_by("accepted_at").values_list("text", flat=True)
    )


@pytest.fixture(scope="module")
def web_server(server_factory, tmp_path_factory):
    return server_factory.start(
        CHAT_APP="tests.apps.web_app", ECHO_STATE_DIR=str(tmp_path_factory.mktemp("origin-echo"))
    )


@pytest.fixture
async def open_chat(browser: Browser, web_server) -> AsyncIterator[Callable[[], Awaitable[Chat]]]:
    async for open_page in _page_opener(browser, web_server.url):
        yield open_page


@pytest.fixture
def attack_site() -> Iterator[Callable[[str], AttackSite]]:
    sites: list[AttackSite] = []

    def start(text: str) -> AttackSite:
        sites.append(AttackSite(text))
        return sites[-1]

    yield start
    for site in sites:
        site.stop()


async def test_a_page_on_another_port_cannot_use_the_users_socket(
    open_chat, web_server, attack_site, make_user
):
    user = make_user()
    chat = await open_chat()
    await chat.sign_in(user)  # Tether's own page connects (sign_in waits for it) ...
    await chat.send("from my own page")
    await chat.wait_reply("Echo #1: from my own page")  # ... and sends, as the user
    assert await recorded_texts(user) == ["from my own page"]

    site = attack_site("sent by another page")
    site.target_port = web_server.port
    visit = Visit(await chat.page.context.new_page())
    log = await visit.run(f"{site.url}/")

    recorded = await recorded_texts(user)
    evidence = visit.evidence(log, site, recorded)
    # The browser did send the user's session cookie to this host (cookies know no port) ...
    assert any("sessionid=" in cookie for cookie in site.cookies), evidence
    # ... and Tether refused the page's handshake: never open, nothing received, nothing sent.
    assert "open" not in log and not any(line.startswith("received") for line in log), evidence
    assert any("403" in event for event in visit.socket_events), evidence
    assert recorded == ["from my own page"], evidence

    # The user's own page is still connected and still sends.
    await chat.wait_connected()
    await chat.send("still mine")
    await chat.wait_reply("Echo #2: still mine")
    assert await recorded_texts(user) == ["from my own page", "still mine"]
    await chat.assert_clean()


async def test_a_trusted_origin_lets_the_same_page_in(
    server_factory, browser, attack_site, make_user, tmp_path
):
    """The control: with the page's origin in ``CSRF_TRUSTED_ORIGINS`` the same page sends as
    the user, so the refusal above is the Origin check's doing."""
    user = make_user()
    site = attack_site("sent by a trusted page")  # its port first: the server is told to trust it
    trusting = server_factory.start(
        CHAT_APP="tests.apps.web_app", ECHO_STATE_DIR=str(tmp_path / "echo"), CSRF_TRUSTED_ORIGINS=site.url
    )
    site.target_port = trusting.port
    async for open_page in _page_opener(browser, trusting.url):
        chat = await open_page()
        await chat.sign_in(user)
        visit = Visit(await chat.page.context.new_page())
        log = await visit.run(f"{site.url}/")
        recorded = await recorded_texts(user)
        assert "acknowledged" in log, visit.evidence(log, site, recorded)
        assert recorded == ["sent by a trusted page"], visit.evidence(log, site, recorded)
