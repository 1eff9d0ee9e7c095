"""The web UI end to end: Playwright drives headless Chromium (Debian's ``chromium`` package)
against a live daphne server running the echo engine with a greeting (``tests.apps.web_app``).

Screenshots of the main screens are saved under ``test-artifacts/screenshots/`` at the root of
the repository (ignored by git), one PNG per screen, named after what it shows.

Every page records its WebSockets (so a test can drop the connection from the page) and the
frames it sends on them, and, on each DOM change, any message id shown twice; a test ends by
checking there was none, and that no script error or dialog (an ``alert`` from injected markup)
happened.

Most tests run the engine runtime (``tests.apps.web_app``); one runs a hooks-API app
(``examples.notes_app``), whose ``on_message`` answers in the sending session.
"""

import asyncio
import contextlib
import json
import os
import re
import struct
import uuid
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async
from playwright.async_api import Browser, Page, ViewportSize, expect

from tests.apps.web_app import GREETING
from threads_app.models import AcceptedMessage
from threads_app.services import accept_message, ensure_thread, upsert_step

# browser: drives Debian's Chromium through Playwright (skipped where it is not installed, outside CI).
pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "test-artifacts" / "screenshots"
CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
DESKTOP: ViewportSize = {"width": 1280, "height": 800}
PHONE: ViewportSize = {"width": 390, "height": 844}
TIMEOUT_MS = 20_000

# Runs before any script of every page.
PAGE_PROBES = """
window.__csp = [];
// (A socket the test sends to the closed port while "the network is down" is its own doing.)
document.addEventListener("securitypolicyviolation", (e) => {
  if (!String(e.blockedURI).includes("127.0.0.1:9/")) window.__csp.push(`${e.violatedDirective} ${e.blockedURI}`);
});
window.__sockets = [];
window.__sent = [];
const NativeWebSocket = window.WebSocket;
// While __blockSockets is set, new sockets go to a closed port (the network is down).
window.__blockSockets = false;
window.WebSocket = class extends NativeWebSocket {
  constructor(url, ...rest) {
    super(window.__blockSockets ? String(url).replace(location.host, "127.0.0.1:9") : url, ...rest);
    window.__sockets.push(this);
  }
  send(data) { window.__sent.push(String(data)); return super.send(data); }
};
window.__duplicates = [];
document.addEventListener("DOMContentLoaded", () => {
  const check = () => {
    const seen = new Set();
    for (const node of document.querySelectorAll("#transcript > .msg, #pending > .msg")) {
      if (seen.has(node.dataset.id)) window.__duplicates.push(node.dataset.id);
      seen.add(node.dataset.id);
    }
  };
  new MutationObserver(check).observe(document.body, { childList: true, subtree: true });
});
"""


def require_chromium() -> None:
    """Skip without Chromium, except in CI (``CI`` set), where a missing browser fails."""
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail(f"Chromium is missing at {CHROMIUM}; .ci/run installs Debian's chromium package")
        pytest.skip(f"Chromium is not installed at {CHROMIUM} (apt-get install chromium)")


@pytest.fixture(scope="module")
def web_server(server_factory, tmp_path_factory):
    return server_factory.start(
        CHAT_APP="tests.apps.web_app", ECHO_STATE_DIR=str(tmp_path_factory.mktemp("web-echo"))
    )


@pytest.fixture(scope="module")
def hooks_server(server_factory):
    """A hooks-API app: its on_message streams "Noted. That makes N notes." itself."""
    return server_factory.start(CHAT_APP="examples.notes_app")


class Chat:
    """A signed-in browser tab on the chat page, and what a test reads from it."""

    def __init__(self, page: Page, base_url: str) -> None:
        self.page = page
        self.base_url = base_url
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        self.accept_dialogs = False
        # Requests to anywhere but this server (the page must work offline, from one origin).
        self.elsewhere: list[str] = []
        page.on("pageerror", lambda error: self.errors.append(str(error)))
        page.on("dialog", self._on_dialog)
        page.on("request", self._on_request)

    def _on_request(self, request) -> None:
        # (chrome: and chrome-extension: are Chromium's built-in PDF viewer, in a frame of ours)
        if not request.url.startswith((self.base_url, "data:", "blob:", "chrome:", "chrome-extension:")):
            self.elsewhere.append(request.url)

    async def _on_dialog(self, dialog) -> None:
        self.dialogs.append(dialog.message)
        if self.accept_dialogs:
            await dialog.accept()
        else:
            await dialog.dismiss()

    # --- actions ------------------------------------------------------------------------------

    async def sign_in(self, user, *, screenshot: str | None = None) -> None:
        await self.page.goto(f"{self.base_url}/")
        await expect(self.page).to_have_url(re.compile(r"/accounts/login/"))
        await self.page.fill("#id_username", user.username)
        await self.page.fill("#id_password", user.raw_password)
        if screenshot:
            await self.shot(screenshot)
        await self.page.click("button[type=submit]")
        await expect(self.page).to_have_url(f"{self.base_url}/")
        await self.wait_connected()

    async def wait_connected(self) -> None:
        await expect(self.page.locator("body")).to_have_attribute("data-connection", "up")

    async def send(self, text: str) -> None:
        await self.page.fill("#message-input", text)
        await self.page.press("#message-input", "Enter")

    async def new_chat(self) -> None:
        """Press "New chat": the page clears its session and loads a fresh chat."""
        async with self.page.expect_navigation(url=f"{self.base_url}/"):
            await self.page.click("#new-chat")
        await self.wait_connected()

    async def drop_socket(self) -> None:
        await self.page.evaluate("window.__sockets.at(-1).close()")

    async def drop_network(self, seconds: float) -> None:
        """Close the socket and let no new one through for ``seconds``."""
        await self.page.evaluate("window.__blockSockets = true; window.__sockets.at(-1).close()")
        await asyncio.sleep(seconds)
        await self.page.evaluate("window.__blockSockets = false")

    def record_history_reads(self) -> list[str]:
        """URLs of the transcript reads (history, bootstrap) the page makes from now on."""
        reads: list[str] = []
        self.page.on(
            "request",
            lambda request: (
                reads.append(request.url)
                if "/history" in request.url or "/bootstrap" in request.url
                else None
            ),
        )
        return reads

    async def reload(self) -> None:
        await self.page.reload()
        await self.wait_connected()

    async def open_thread(self, thread_id: object) -> None:
        await self.page.goto(f"{self.base_url}/thread/{thread_id}/")
        await self.wait_connected()

    async def set_theme(self, choice: str) -> None:
        """Choose a theme in the account menu (system, light, dark) from the keyboard, as a side
        panel over the header leaves it reachable: Enter opens the menu, Space on the theme's
        radio button chooses it, Esc closes the menu and gives the focus back to its button.
        Behind a modal dialog the menu is inert, as it should be: there the theme is set
        through theme.js's own API, to see the dialog in both themes."""
        if await self.page.evaluate("!!document.querySelector('dialog[open]:modal')"):
            await self.page.evaluate("choice => window.tetherTheme.choose(choice)", choice)
            await expect(self.page.locator("html")).to_have_attribute("data-theme-choice", choice)
            return
        await self.page.focus("#account-button")
        await self.page.keyboard.press("Enter")
        await self.page.focus(f'#account-menu input[value="{choice}"]')
        await self.page.keyboard.press("Space")
        assert await self.theme_choice() == choice
        await self.page.keyboard.press("Escape")
        await expect(self.page.locator("#account-menu")).to_be_hidden()
        await expect(self.page.locator("#account-button")).to_be_focused()

    async def theme_choice(self) -> str:
        """The theme the account menu shows as chosen."""
        return str(await self.page.eval_on_selector("#account-menu input:checked", "input => input.value"))

    async def shot(self, name: str) -> None:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        await self.page.screenshot(path=str(SCREENSHOTS / f"{name}.png"))

    # --- reading ----------------------------------------------------------------------------

    def locator(self, selector: str, **kwargs):
        return self.page.locator(selector, **kwargs)

    @property
    def working(self):
        return self.page.locator("#working")

    @property
    def messages(self):
        return self.page.locator("#transcript > .msg")

    @property
    def pending(self):
        return self.page.locator("#pending > .msg")

    @property
    def streaming(self):
        return self.page.locator("#transcript > .msg-assistant[data-streaming]")

    @property
    def thread_links(self):
        return self.page.locator("#thread-list .thread-link")

    def reply(self, text: str):
        """The completed reply whose whole text is ``text``."""
        return self.page.locator("#transcript > .msg-assistant:not([data-streaming])").filter(
            has=self.page.locator(".msg-body", has_text=re.compile(rf"^\s*{re.escape(text)}\s*$"))
        )

    async def wait_reply(self, text: str) -> None:
        await expect(self.reply(text)).to_have_count(1)

    async def transcript(self) -> list[list[str]]:
        """[role, text] of every message on screen, the transcript's then the pending ones."""
        messages: list[list[str]] = await self.page.eval_on_selector_all(
            "#transcript > .msg, #pending > .msg",
            """nodes => nodes.map(node => [
              node.classList.contains("pending") ? "pending" : node.className.replace("msg msg-", ""),
              node.querySelector(".msg-body").innerText.trim(),
            ])""",
        )
        return messages

    def unsent(self, text: str):
        """The pending copy of a send shown as not sent, by its text."""
        return self.page.locator('#pending > .msg[data-state="failed"]').filter(
            has=self.page.locator(".msg-body", has_text=re.compile(rf"^\s*{re.escape(text)}\s*$"))
        )

    @property
    def stopped_replies(self):
        """Replies the server kept as far as they got when a stop cut them (metadata.interrupted)."""
        return self.page.locator("#transcript > .msg-assistant[data-interrupted]").filter(
            has=self.page.locator(".msg-stopped", has_text="Stopped")
        )

    async def sent_events(self, name: str) -> list[object]:
        """The payloads of the Socket.IO events ``name`` this page emitted (``42[...]`` frames,
        with or without an ack id)."""
        payloads = []
        for frame in await self.page.evaluate("window.__sent"):
            match = re.match(r"^42\d*(\[.*\])$", frame, re.DOTALL)
            if match:
                event = json.loads(match.group(1))
                if event[0] == name:
                    payloads.append(event[1] if len(event) > 1 else None)
        return payloads

    async def assert_clean(self) -> None:
        """Nothing was ever shown twice, no script failed, no dialog opened, the page broke no
        rule of its Content-Security-Policy and asked nothing of another origin."""
        assert await self.page.evaluate("window.__duplicates") == []
        assert self.errors == []
        assert self.dialogs == []
        assert await self.page.evaluate("window.__csp") == [], "Content-Security-Policy violations"
        assert self.elsewhere == [], f"the page asked another origin: {self.elsewhere}"


async def _page_opener(browser: Browser, base_url: str) -> AsyncIterator[Callable[..., Awaitable[Chat]]]:
    contexts = []

    async def open_page(viewport: ViewportSize = DESKTOP) -> Chat:
        context = await browser.new_context(viewport=viewport)
        context.set_default_timeout(TIMEOUT_MS)
        await context.add_init_script(PAGE_PROBES)
        contexts.append(context)
        return Chat(await context.new_page(), base_url)

    yield open_page
    for context in contexts:
        await context.close()


@pytest.fixture
async def open_chat(browser: Browser, web_server):
    async for open_page in _page_opener(browser, web_server.url):
        yield open_page


@pytest.fixture
async def open_hooks_chat(browser: Browser, hooks_server):
    async for open_page in _page_opener(browser, hooks_server.url):
        yield open_page


THREAD_URL = re.compile(r"/thread/[0-9a-f-]{36}/$")
expect.set_options(timeout=TIMEOUT_MS)


async def test_sign_in_send_and_watch_the_reply_stream_in(open_chat, make_user):
    chat = await open_chat()
    await chat.sign_in(make_user(), screenshot="01-sign-in")
    page = chat.page
    await expect(chat.locator(".msg-assistant .msg-body")).to_have_text(GREETING)
    await expect(chat.locator("#threads-empty")).to_be_visible()
    await chat.shot("02-new-chat")

    # Shift+Enter is a new line, not a send.
    await page.fill("#message-input", "!slow 0.12")
    await page.press("#message-input", "Shift+Enter")
    await page.keyboard.type("Tokens arrive one by one, and the **reply** grows with `code` too")
    assert await chat.pending.count() == 0
    await page.press("#message-input", "Enter")
    await expect(chat.locator("#message-input")).to_have_value("")

    # The indicator turns on, the reply grows token by token while it is streaming...
    await expect(chat.working).to_be_visible()
    await expect(chat.locator("#stop")).to_be_visible()
    body = chat.streaming.locator(".msg-body")
    await expect(body).to_have_text(re.compile(r"^Echo #1: Tokens"))
    first = await body.inner_text()
    await expect(body).not_to_have_text(first)  # it grew
    assert (await body.inner_text()).startswith(first)
    await chat.shot("03-reply-streaming")

    # ... and completes once, rendered as markdown; the indicator turns off.
    await chat.wait_reply("Echo #1: Tokens arrive one by one, and the reply grows with code too")
    await expect(chat.working).to_be_hidden()
    await expect(chat.locator("#stop")).to_be_hidden()
    await expect(chat.locator("#transcript strong")).to_have_text("reply")
    await expect(chat.locator("#transcript .msg-assistant code")).to_have_text("code")
    await expect(chat.locator("#transcript > .msg-assistant")).to_have_count(2)  # greeting, answer

    # The new chat got its thread: its URL, its title, its place in the sidebar.
    await expect(page).to_have_url(THREAD_URL)
    await expect(chat.locator("#thread-list .thread-link[aria-current=page]")).to_have_count(1)
    # Titled without the directive line and the markdown (threads_app.titles).
    title = "Tokens arrive one by one, and the reply grows with code too"
    await expect(chat.locator("#thread-title")).to_have_text(title)

    # A code block; then Escape stops a long reply.
    await chat.send("Some code:\n```python\nprint('hello')\n```")
    await expect(chat.locator("#transcript .code-block pre")).to_have_text("print('hello')")
    await expect(chat.working).to_be_hidden()
    await chat.send("!slow 0.3\nthis reply is stopped long before it could finish streaming all of its words")
    await expect(chat.streaming).to_have_count(1)
    await page.keyboard.press("Escape")
    await expect(chat.locator("#transcript .msg-body", has_text="Task manually stopped.")).to_have_count(1)
    await expect(chat.working).to_be_hidden()
    await expect(chat.streaming).to_have_count(0)
    await chat.shot("04-conversation")
    await chat.assert_clean()

    # Signing out is a POST form, in the account menu.
    await page.click("#account-button")
    await page.click("form.logout button")
    await expect(page).to_have_url(re.compile(r"/accounts/login/"))


async def test_a_second_quick_message_shows_pending_and_both_answers_arrive_in_order(open_chat, make_user):
    chat = await open_chat()
    await chat.sign_in(make_user())
    await chat.send("!slow 0.06\nthe first message takes a little while to answer")
    await chat.send("the second message")
    await expect(chat.pending.filter(has_text="the second message")).to_have_count(1)
    await expect(chat.locator('#pending > .msg[data-state="queued"]')).to_have_text(
        re.compile("the second message")
    )
    await chat.shot("05-second-message-pending")

    await chat.wait_reply("Echo #2: the second message")
    await chat.wait_reply("Echo #1: the first message takes a little while to answer")
    await expect(chat.pending).to_have_count(0)
    await expect(chat.working).to_be_hidden()
    assert await chat.transcript() == [
        ["assistant", GREETING],
        ["user", "!slow 0.06\nthe first message takes a little while to answer"],
        ["assistant", "Echo #1: the first message takes a little while to answer"],
        ["user", "the second message"],
        ["assistant", "Echo #2: the second message"],
    ]
    await chat.assert_clean()


async def test_a_reload_in_the_middle_of_a_reply_brings_the_thread_back_and_the_reply_completes_once(
    open_chat, make_user
):
    chat = await open_chat()
    await chat.sign_in(make_user())
    words = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen"
    await chat.send(f"!slow 0.15\n{words}")
    await chat.send("queued behind it")
    await expect(chat.locator('#pending > .msg[data-state="queued"]')).to_have_count(1)
    await expect(chat.streaming).to_have_count(1)
    await expect(chat.page).to_have_url(THREAD_URL)

    await chat.reload()
    # The thread comes back: its history, the reply still streaming, and the queued message
    # pending (bootstrap's pending) until it lands.
    await expect(chat.messages.filter(has_text=words)).to_have_count(1)
    await expect(chat.pending.filter(has_text="queued behind it")).to_have_count(1)
    await expect(chat.working).to_be_visible()
    await chat.shot("06-after-reload-mid-reply")

    await chat.wait_reply(f"Echo #1: {words}")
    await chat.wait_reply("Echo #2: queued behind it")
    await expect(chat.pending).to_have_count(0)
    await expect(chat.working).to_be_hidden()
    expected = [
        ["assistant", GREETING],
        ["user", f"!slow 0.15\n{words}"],
        ["assistant", f"Echo #1: {words}"],
        ["user", "queued behind it"],
        ["assistant", "Echo #2: queued behind it"],
    ]
    assert await chat.transcript() == expected
    await chat.assert_clean()
    await chat.reload()
    await expect(chat.messages).to_have_count(len(expected))
    assert await chat.transcript() == expected
    await chat.assert_clean()


async def test_an_older_thread_opened_from_the_sidebar_shows_its_history_once_and_takes_messages(
    open_chat, make_user
):
    chat = await open_chat()
    await chat.sign_in(make_user())
    page = chat.page
    await chat.send("about the first thread")
    await chat.wait_reply("Echo #1: about the first thread")
    await expect(page).to_have_url(THREAD_URL)
    first_url = page.url

    await chat.new_chat()
    await expect(chat.locator(".msg-assistant .msg-body")).to_have_text(GREETING)
    await chat.send("about the second thread")
    await chat.wait_reply("Echo #1: about the second thread")
    # Newest first.
    await expect(chat.thread_links).to_have_text(["about the second thread", "about the first thread"])

    await chat.thread_links.filter(has_text="about the first thread").click()
    await expect(page).to_have_url(first_url)
    await chat.wait_connected()
    history = [
        ["assistant", GREETING],
        ["user", "about the first thread"],
        ["assistant", "Echo #1: about the first thread"],
    ]
    await expect(chat.messages).to_have_count(3)
    await expect(chat.locator("#thread-list .thread-link[aria-current=page]")).to_have_text(
        "about the first thread"
    )
    assert await chat.transcript() == history
    await chat.shot("07-older-thread-from-sidebar")

    await chat.send("back in the first thread")
    await chat.wait_reply("Echo #2: back in the first thread")  # the engine resumed its conversation
    assert await chat.transcript() == [
        *history,
        ["user", "back in the first thread"],
        ["assistant", "Echo #2: back in the first thread"],
    ]
    await chat.assert_clean()


async def test_the_sidebar_searches_renames_and_deletes_threads(open_chat, make_user):
    chat = await open_chat()
    await chat.sign_in(make_user())
    page = chat.page
    for text in ("apples and pears", "bananas"):
        await chat.new_chat()
        await chat.send(text)
        await chat.wait_reply(f"Echo #1: {text}")
    links = chat.thread_links
    await expect(links).to_have_text(["bananas", "apples and pears"])

    await page.fill("#thread-search", "pear")
    await expect(links).to_have_text(["apples and pears"])
    await page.fill("#thread-search", "kiwi")
    await expect(links).to_have_count(0)
    await expect(chat.locator("#threads-empty")).to_have_text("No chats match.")
    await page.fill("#thread-search", "")
    await expect(links).to_have_count(2)

    # Rename the current thread from the keyboard: the sidebar and the title follow.
    await chat.locator("#thread-list .thread-item", has_text="bananas").locator(".rename").click()
    rename = chat.locator(".rename-form input")
    await expect(rename).to_be_focused()
    await rename.fill("Bananas, renamed")
    await rename.press("Enter")
    await expect(links).to_have_text(["Bananas, renamed", "apples and pears"])
    await expect(chat.locator("#thread-title")).to_have_text("Bananas, renamed")
    await chat.shot("08-sidebar")

    # Delete the other one, confirmed in the page's own dialog (Cancel first, then Delete).
    delete = chat.locator("#thread-list .thread-item", has_text="apples and pears").locator(".delete")
    await delete.click()
    confirm = chat.page.get_by_role("dialog", name=re.compile("apples and pears"))
    await expect(confirm.get_by_role("button", name="Cancel")).to_be_focused()
    await chat.shot("08b-confirm-delete")
    await chat.page.keyboard.press("Escape")
    await expect(confirm).to_have_count(0)
    await expect(links).to_have_count(2)
    await delete.click()
    await confirm.get_by_role("button", name="Delete").click()
    await expect(links).to_have_text(["Bananas, renamed"])
    assert chat.dialogs == []  # no native box
    await chat.reload()
    await expect(links).to_have_text(["Bananas, renamed"])
    assert chat.errors == []


async def test_a_dropped_socket_reconnects_without_duplicates_or_a_second_greeting(open_chat, make_user):
    chat = await open_chat()
    await chat.sign_in(make_user())
    banner = chat.locator("#banner")
    await expect(chat.locator(".msg-assistant .msg-body")).to_have_text(GREETING)
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu"
    await chat.send(f"!slow 0.15\n{words}")
    await expect(chat.streaming).to_have_count(1)

    await chat.drop_socket()
    await expect(banner).to_be_visible()
    await expect(banner).to_contain_text("Reconnecting")
    await chat.shot("09-connection-lost-banner")
    await expect(banner).to_be_hidden()
    await chat.wait_reply(f"Echo #1: {words}")
    await expect(chat.working).to_be_hidden()

    # A message sent while the socket is down waits, then goes once it is back.
    await chat.drop_socket()
    await expect(banner).to_be_visible()
    await chat.send("sent while offline")
    await expect(chat.pending.filter(has_text="sent while offline")).to_have_count(1)
    await chat.wait_reply("Echo #2: sent while offline")
    await expect(banner).to_be_hidden()

    expected = [
        ["assistant", GREETING],  # once: a restored session is not greeted again
        ["user", f"!slow 0.15\n{words}"],
        ["assistant", f"Echo #1: {words}"],
        ["user", "sent while offline"],
        ["assistant", "Echo #2: sent while offline"],
    ]
    assert await chat.transcript() == expected
    assert await chat.page.evaluate("window.__sockets.length") >= 3
    await chat.assert_clean()

    # Everything the server sent is in the thread after a reload.
    await chat.reload()
    await expect(chat.messages).to_have_count(len(expected))
    assert await chat.transcript() == expected
    await chat.assert_clean()


@pytest.fixture
async def open_lifecycle_chat(browser: Browser, server):
    """The lifecycle test app (a hooks-API app whose ``slowstream N S`` streams slowly)."""
    async for open_page in _page_opener(browser, server.url):
        yield open_page


async def watch_stream(chat: Chat, reply: str) -> list[str]:
    """Every text the streaming reply showed until it finished (sampled every 20 ms)."""
    seen: list[str] = []
    body = chat.streaming.locator(".msg-body")
    while await chat.streaming.count():
        with contextlib.suppress(Exception):
            seen.append((await body.inner_text(timeout=500)).strip())
        await asyncio.sleep(0.02)
    await chat.wait_reply(reply)
    return seen


@pytest.mark.parametrize("kind", ["engine", "hooks"])
async def test_a_two_second_drop_mid_reply_misses_no_token_and_reads_no_history(
    open_chat, open_lifecycle_chat, make_user, kind
):
    if kind == "engine":
        chat = await open_chat()
        words = " ".join(f"w{i}" for i in range(40))
        message, reply = f"!slow 0.1\n{words}", f"Echo #1: {words}"
    else:
        chat = await open_lifecycle_chat()
        message, reply = "slowstream 40 0.1", " ".join(f"t{i}" for i in range(40))
    await chat.sign_in(make_user())
    await chat.send(message)
    await expect(chat.streaming).to_have_count(1)
    await expect(chat.streaming.locator(".msg-body")).to_contain_text("w3" if kind == "engine" else "t3")
    reads = chat.record_history_reads()

    await chat.drop_network(2)
    seen = await watch_stream(chat, reply)

    # Back before the reply ended: the tokens sent while the page was away were replayed, so
    # every text it showed is the start of the reply, with nothing missing in between.
    assert seen, "the reply had ended before the page was back"
    assert all(reply.startswith(text) for text in seen), [t for t in seen if not reply.startswith(t)][:1]
    assert reads == [], f"the page read the history after the drop: {reads}"
    await chat.assert_clean()


async def test_a_reload_mid_reply_shows_the_reply_from_its_first_token(open_chat, make_user):
    chat = await open_chat()
    await chat.sign_in(make_user())
    words = " ".join(f"w{i}" for i in range(60))
    await chat.send(f"!slow 0.1\n{words}")
    await expect(chat.streaming.locator(".msg-body")).to_contain_text("w5")
    await expect(chat.page).to_have_url(THREAD_URL)

    await chat.reload()
    # Still streaming, and from the first token: what streamed before the reload is there.
    await expect(chat.streaming.locator(".msg-body")).to_contain_text("Echo #1: w0 w1 w2 w3 w4 w5")
    seen = await watch_stream(chat, f"Echo #1: {words}")
    assert all(f"Echo #1: {words}".startswith(text) for text in seen)
    await chat.assert_clean()


async def eventually(read, expected, timeout: float = TIMEOUT_MS / 1000):
    """Wait until ``await read()`` returns ``expected``."""
    deadline = asyncio.get_running_loop().time() + timeout
    while (value := await read()) != expected:
        assert asyncio.get_running_loop().time() < deadline, f"still {value!r}, not {expected!r}"
        await asyncio.sleep(0.05)


def tiny_png(width: int = 48, height: int = 32) -> bytes:
    """A valid PNG (a colour gradient) made without an imaging library."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(
        b"\x00" + b"".join(bytes((x * 5 % 256, y * 7 % 256, 160)) for x in range(width))
        for y in range(height)
    )
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


async def test_an_attached_photo_shows_after_a_reload_through_its_lazily_loaded_media_ref(
    open_chat, make_user, tmp_path
):
    chat = await open_chat()
    await chat.sign_in(make_user())
    photo = tmp_path / "gradient.png"
    photo.write_bytes(tiny_png())
    await chat.page.set_input_files("#file-input", str(photo))
    await expect(chat.locator("#attachments .attachment")).to_have_count(1)
    await chat.page.fill("#message-input", "here is a photo")
    await chat.shot("10-photo-attached")
    await chat.page.press("#message-input", "Enter")
    await chat.wait_reply("Echo #1: here is a photo [1 image received]")

    await chat.reload()
    image = chat.locator("#transcript > .msg-user img.photo")
    await expect(image).to_have_count(1)
    await expect(image).to_have_attribute("loading", "lazy")
    await expect(image).to_have_attribute("src", re.compile(r"^/api/session-media/[\w-]+/[\w-]+/0$"))
    await image.scroll_into_view_if_needed()
    await eventually(lambda: image.evaluate("img => img.complete && img.naturalWidth"), 48)
    await chat.shot("11-photo-after-reload")
    await chat.assert_clean()


async def test_markup_and_javascript_links_in_a_message_render_inert(open_chat, make_user):
    chat = await open_chat()
    await chat.sign_in(make_user())
    attack = (
        "look <img src=x onerror=alert(1)> and [click me](javascript:alert(2)) "
        'and <a href="javascript:alert(3)">raw link</a> <script>alert(4)</script> [fine](https://example.org/)'
    )
    await chat.send(attack)
    done = chat.locator("#transcript > .msg-assistant:not([data-streaming])", has_text="Echo #1: look")
    await expect(done).to_have_count(1)
    await expect(chat.working).to_be_hidden()

    async def check() -> None:
        reply = chat.locator("#transcript > .msg-assistant").last
        for message in (reply, chat.locator("#transcript > .msg-user").last):
            body = message.locator(".msg-body")
            assert await body.locator("img, script, iframe, [onerror], [onclick]").count() == 0
            await expect(body).to_contain_text("<img src=x onerror=alert(1)>")  # shown as text
        hrefs = await reply.locator("a").evaluate_all("links => links.map(a => a.getAttribute('href'))")
        assert hrefs == [None, "https://example.org/"]  # the javascript: link lost its target
        await reply.locator("a", has_text="click me").click()
        await chat.assert_clean()

    await check()
    await chat.shot("12-markup-rendered-inert")
    await chat.reload()
    await expect(chat.locator("#transcript > .msg-assistant").last).to_contain_text("Echo #1: look")
    await check()


async def test_the_chat_is_usable_on_a_phone_sized_screen(open_chat, make_user):
    chat = await open_chat(PHONE)
    await chat.sign_in(make_user())
    page = chat.page
    await expect(chat.locator("#sidebar")).to_be_hidden()
    await expect(chat.locator("#message-input")).to_be_in_viewport()
    await expect(chat.locator("#send")).to_be_in_viewport()
    text = "hello from a phone, with a longer line of text that has to wrap on a narrow screen"
    await chat.send(text)
    await chat.wait_reply(f"Echo #1: {text}")
    assert await page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    await chat.shot("13-phone-chat")

    await page.click("#sidebar-toggle")
    await expect(chat.locator("#sidebar")).to_be_visible()
    await expect(chat.locator("#sidebar-toggle")).to_have_attribute("aria-expanded", "true")
    await expect(chat.locator("#thread-search")).to_be_focused()
    await expect(chat.thread_links).to_have_count(1)
    await eventually(lambda: chat.locator("#sidebar").evaluate("s => s.getBoundingClientRect().left"), 0)
    await chat.shot("14-phone-sidebar")
    await page.keyboard.press("Escape")
    await expect(chat.locator("#sidebar")).to_be_hidden()
    await chat.assert_clean()


# --- stop, unsent messages, send again ----------------------------------------------------


@sync_to_async
def thread_with_a_stopped_reply_and_two_unsent(user) -> uuid.UUID:
    """A thread as the server leaves it after a stop with two sends queued: the partial reply
    kept as interrupted, the two sends failed ("stopped")."""
    thread, _ = ensure_thread(user, uuid.uuid4(), name="a story, stopped")
    asked = uuid.uuid4()
    accept_message(message_id=asked, thread=thread, author=user, text="tell me a story")
    upsert_step(thread.pk, asked, type="user_message", name=user.username, output="tell me a story")
    AcceptedMessage.objects.filter(client_id=asked).update(
        state=AcceptedMessage.State.TRANSCRIBED, queued=False, outcome=AcceptedMessage.Outcome.INTERRUPTED
    )
    upsert_step(
        thread.pk,
        uuid.uuid4(),
        type="assistant_message",
        name="assistant",
        output="Echo #1: once upon a",
        metadata={"interrupted": True},
    )
    upsert_step(
        thread.pk, uuid.uuid4(), type="assistant_message", name="assistant", output="Task manually stopped."
    )
    for text in ("first unsent", "second unsent"):
        message, _ = accept_message(message_id=uuid.uuid4(), thread=thread, author=user, text=text)
        AcceptedMessage.objects.filter(pk=message.pk).update(
            state=AcceptedMessage.State.FAILED, failure=AcceptedMessage.Failure.STOPPED, queued=True
        )
    return thread.pk


async def test_a_stopped_reply_and_unsent_messages_read_from_the_thread_offer_send_again(
    open_chat, make_user
):
    """What a reload shows after a stop, from bootstrap alone (whatever the live server does):
    the partial reply marked stopped, the dropped sends "Not sent" with a Send again button
    that re-emits the same message id with ``retry: true``."""
    user = make_user()
    thread_id = await thread_with_a_stopped_reply_and_two_unsent(user)
    chat = await open_chat()
    await chat.sign_in(user)
    await chat.open_thread(thread_id)

    await expect(chat.stopped_replies).to_have_count(1)
    await expect(chat.stopped_replies.locator(".msg-body")).to_have_text("Echo #1: once upon a")
    for text in ("first unsent", "second unsent"):
        await expect(chat.unsent(text)).to_have_count(1)
        await expect(chat.unsent(text).locator(".msg-status")).to_contain_text(
            "Not sent: stopped before it was answered"
        )
    buttons = chat.page.get_by_role("button", name="Send again")
    await expect(buttons).to_have_count(2)
    # Each button says which message it sends again.
    await expect(buttons.first).to_have_accessible_description("first unsent")
    await expect(buttons.last).to_have_accessible_description("second unsent")
    assert await chat.transcript() == [
        ["user", "tell me a story"],
        ["assistant", "Echo #1: once upon a"],
        ["assistant", "Task manually stopped."],
        ["pending", "first unsent"],
        ["pending", "second unsent"],
    ]
    await chat.shot("15-unsent-messages-from-the-thread")

    message_id = await chat.unsent("first unsent").get_attribute("data-id")
    await chat.unsent("first unsent").get_by_role("button", name="Send again").focus()
    await chat.page.keyboard.press("Enter")  # reachable from the keyboard
    await expect(chat.unsent("first unsent")).to_have_count(0)
    await expect(chat.unsent("second unsent")).to_have_count(1)
    retries = [p for p in await chat.sent_events("client_message") if isinstance(p, dict) and p.get("retry")]
    assert retries == [{"message": {"id": message_id, "output": "first unsent"}, "retry": True}]
    await chat.assert_clean()


async def test_stop_keeps_the_partial_reply_and_the_queued_messages_can_be_sent_again(open_chat, make_user):
    """Engine runtime: stop with two sends queued behind a streaming reply, reload, send one
    again. Needs the server side of stop (interrupted reply persisted, ``message_failed``,
    bootstrap ``failed`` with reason "stopped") and of ``retry``."""
    chat = await open_chat()
    await chat.sign_in(make_user())
    await expect(chat.locator(".msg-assistant .msg-body")).to_have_text(GREETING)
    words = " ".join(f"word{n}" for n in range(60))
    await chat.send(f"!slow 0.2\n{words}")
    body = chat.streaming.locator(".msg-body")
    await expect(body).to_have_text(re.compile(r"^Echo #1: word0 word1 word2"))
    await chat.send("first queued")
    await chat.send("second queued")
    await expect(chat.locator('#pending > .msg[data-state="queued"]')).to_have_count(2)
    await expect(chat.streaming).to_have_count(1)

    await chat.page.click("#stop")
    await expect(chat.working).to_be_hidden()
    await expect(chat.streaming).to_have_count(0)
    # The reply stays as far as it got, marked stopped...
    await expect(chat.stopped_replies).to_have_count(1)
    partial = (await chat.stopped_replies.locator(".msg-body").inner_text()).strip()
    assert partial.startswith("Echo #1: word0 word1 word2") and partial != f"Echo #1: {words}"
    # ...and the two queued sends say they were not sent, with a button to send them again.
    for text in ("first queued", "second queued"):
        await expect(chat.unsent(text)).to_have_count(1)
        await expect(chat.unsent(text).get_by_role("button", name="Send again")).to_be_visible()
    await chat.shot("16-stopped-with-two-unsent")
    shown = await chat.transcript()
    await chat.assert_clean()

    # A reload shows the same, read back from the thread.
    await chat.reload()
    await expect(chat.stopped_replies).to_have_count(1)
    await expect(chat.stopped_replies.locator(".msg-body")).to_have_text(partial)
    for text in ("first queued", "second queued"):
        await expect(chat.unsent(text)).to_have_count(1)
    assert await chat.transcript() == shown
    await chat.shot("17-stopped-with-two-unsent-after-reload")

    # Send one again: it is answered, the other stays unsent.
    await chat.unsent("first queued").get_by_role("button", name="Send again").click()
    answer = chat.locator("#transcript > .msg-assistant:not([data-streaming])").filter(
        has=chat.locator(".msg-body", has_text=re.compile(r"^\s*Echo #\d+: first queued\s*$"))
    )
    await expect(answer).to_have_count(1)
    await expect(chat.working).to_be_hidden()
    await expect(chat.pending).to_have_count(1)
    await expect(chat.unsent("second queued")).to_have_count(1)
    rows = await chat.transcript()
    user_row = rows.index(["user", "first queued"])
    assert rows[user_row + 1][0] == "assistant" and rows[user_row + 1][1].endswith(": first queued")
    await chat.shot("18-sent-again-and-answered")
    await chat.assert_clean()


NOTES_GREETING = "Hi! Tell me things to remember, or say 'list'."


async def test_a_hooks_app_confirms_the_users_message_once_above_its_reply(open_hooks_chat, make_user):
    """A hooks-API app (its on_message answers in the sending session): the user's message is
    confirmed (not left "Pending"), shown once, in order, above the reply. Needs the server
    to emit the user's step (``new_message``) on the hooks path."""
    chat = await open_hooks_chat()
    await chat.sign_in(make_user())
    await expect(chat.locator(".msg-assistant .msg-body")).to_have_text(NOTES_GREETING)

    await chat.send("buy milk")
    await chat.wait_reply("Noted. That makes 1 note.")
    await expect(chat.pending).to_have_count(0)
    await expect(chat.locator("#thread-title")).to_have_text("buy milk")  # named by its first message
    await chat.send("call the plumber")
    await chat.wait_reply("Noted. That makes 2 notes.")
    await expect(chat.pending).to_have_count(0)
    expected = [
        ["assistant", NOTES_GREETING],
        ["user", "buy milk"],
        ["assistant", "Noted. That makes 1 note."],
        ["user", "call the plumber"],
        ["assistant", "Noted. That makes 2 notes."],
    ]
    assert await chat.transcript() == expected
    await chat.shot("19-hooks-app-messages-confirmed")
    await chat.assert_clean()

    await chat.reload()
    await expect(chat.messages).to_have_count(len(expected))
    assert await chat.transcript() == expected
    await expect(chat.locator("#thread-title")).to_have_text("buy milk")
    await chat.assert_clean()
