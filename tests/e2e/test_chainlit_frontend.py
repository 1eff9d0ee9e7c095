"""Chainlit's own web frontend (the build in the chainlit wheel, installed by
``manage.py install_chainlit_frontend``) served by Tether under ``CHAINLIT_PATH_PREFIX`` and
driven in Debian's Chromium against a Chainlit-style app (``tests.apps.chainlit_frontend_app``):
sign in, starters, a reply streamed token by token, stop, a thread resumed from the sidebar, an
ask, and thumbs on a reply (of that app and of an engine-runtime app, ``tests.apps.web_app``). Every page runs under the frontend's policy with no violation, raises no script error,
shows no message twice and asks nothing of another origin but the two style sheets Chainlit's
index.html names (the Inter font and KaTeX's CSS, refused here: the tests run offline)."""

import re
from collections.abc import AsyncIterator, Iterator

import pytest
from asgiref.sync import sync_to_async
from playwright.async_api import Browser, Page, expect

from tests.e2e.test_web_ui import DESKTOP, SCREENSHOTS
from tests.support.chainlit_build import chainlit_build_dir
from tests.support.redis_server import PrivateRedis
from tests.support.server import LiveServer
from tests.support.waiting import wait_until_async
from threads_app.models import Feedback

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PREFIX = "/chainlit"
TIMEOUT_MS = 20_000
# What Chainlit's index.html loads from elsewhere (refused in the tests).
CHAINLIT_STYLESHEETS = ("https://fonts.googleapis.com/", "https://cdn.jsdelivr.net/npm/katex@")
PROBES = """
window.__csp = [];
document.addEventListener("securitypolicyviolation", (e) => window.__csp.push(`${e.violatedDirective} ${e.blockedURI}`));
window.__duplicates = [];
document.addEventListener("DOMContentLoaded", () => {
  new MutationObserver(() => {
    const ids = Array.from(document.querySelectorAll("[id^=step-]"), (n) => n.id);
    const twice = ids.filter((id, i) => ids.indexOf(id) !== i);
    if (twice.length) window.__duplicates.push(...twice);
  }).observe(document.body, { childList: true, subtree: true });
});
"""


@pytest.fixture(scope="module")
def frontend_server(server_factory, tmp_path_factory) -> Iterator[LiveServer]:
    build = chainlit_build_dir()
    with PrivateRedis(tmp_path_factory.mktemp("redis")) as redis:
        yield server_factory.start(
            CHAT_APP="tests.apps.chainlit_frontend_app", CHAINLIT_FRONTEND_DIR=str(build), REDIS_URL=redis.url
        )


@pytest.fixture(scope="module")
def engine_frontend_server(server_factory, tmp_path_factory) -> LiveServer:
    """An engine-runtime app (its replies come from the box's engine) under Chainlit's frontend."""
    server: LiveServer = server_factory.start(
        CHAT_APP="tests.apps.web_app",
        CHAINLIT_FRONTEND_DIR=str(chainlit_build_dir()),
        ECHO_STATE_DIR=str(tmp_path_factory.mktemp("chainlit-echo")),
    )
    return server


class ChainlitTab:
    """A tab on Chainlit's frontend, and what a test checks at its end."""

    def __init__(self, page: Page, base: str) -> None:
        self.page = page
        self.base = base
        self.errors: list[str] = []
        self.elsewhere: list[str] = []
        page.on("pageerror", lambda error: self.errors.append(str(error)))
        page.set_default_timeout(TIMEOUT_MS)

    async def sign_in(self, user) -> None:
        await self.page.goto(self.base + "/")
        await expect(self.page).to_have_url(re.compile(re.escape(PREFIX) + "/login$"))
        await self.page.fill("#email", user.username)
        await self.page.fill("#password", user.raw_password)
        await self.page.keyboard.press("Enter")
        await expect(self.page.locator("#chat-input")).to_be_visible()

    async def send(self, text: str) -> None:
        """Type and send, once the composer takes it (its button waits for the socket)."""
        await self.page.fill("#chat-input", text)
        await expect(self.page.locator("#chat-submit")).to_be_enabled()
        await self.page.press("#chat-input", "Enter")
        await expect(self.page.locator("#chat-input")).to_have_value("")

    def messages(self, kind: str):
        return self.page.locator(f'[data-step-type="{kind}"]')

    async def shot(self, name: str) -> None:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        await self.page.screenshot(path=str(SCREENSHOTS / f"chainlit-{name}.png"))

    async def check_clean(self) -> None:
        csp = await self.page.evaluate("window.__csp")
        duplicates = await self.page.evaluate("window.__duplicates")
        assert csp == [] and duplicates == [] and self.errors == [], (csp, duplicates, self.errors)
        assert self.elsewhere == [], self.elsewhere


async def _open_tab(browser: Browser, server: LiveServer) -> AsyncIterator[ChainlitTab]:
    context = await browser.new_context(viewport=DESKTOP)
    await context.add_init_script(PROBES)
    here = server.url
    chainlit_tab: ChainlitTab | None = None

    async def route(route) -> None:
        """Only this server is reached; a request elsewhere is refused, and noted unless it is
        one of the style sheets Chainlit's page names."""
        url = route.request.url
        if url.startswith(here):
            await route.continue_()
            return
        if not url.startswith(CHAINLIT_STYLESHEETS) and chainlit_tab is not None:
            chainlit_tab.elsewhere.append(url)
        await route.abort()

    await context.route("**/*", route)
    chainlit_tab = ChainlitTab(await context.new_page(), here + PREFIX)
    yield chainlit_tab
    await context.close()


@pytest.fixture
async def tab(browser: Browser, frontend_server) -> AsyncIterator[ChainlitTab]:
    async for opened in _open_tab(browser, frontend_server):
        yield opened


# Each app kind: its server's fixture, its greeting (if any), the message sent, the reply rated.
FEEDBACK_APPS = {
    "hooks": ("frontend_server", None, "rate me", "You said: rate me"),
    "engine": ("engine_frontend_server", "I echo what you send", "rate me", "Echo #1: rate me"),
}


@pytest.fixture(params=sorted(FEEDBACK_APPS))
async def app_tab(request, browser: Browser) -> AsyncIterator[tuple[str, ChainlitTab]]:
    server = request.getfixturevalue(FEEDBACK_APPS[request.param][0])
    async for opened in _open_tab(browser, server):
        yield request.param, opened


@sync_to_async
def stored_feedback(user) -> list[tuple[int, str, str, str]]:
    """The user's feedback rows: value, comment, and the rated step's type and output."""
    return list(
        Feedback.objects.filter(user=user).values_list("value", "comment", "step__type", "step__output")
    )


async def test_sign_in_starters_and_a_reply_streamed_token_by_token(tab, make_user):
    user = make_user()
    await tab.sign_in(user)
    await expect(tab.page.locator("#starters")).to_be_visible()
    await tab.shot("starters")
    await tab.page.click("#starter-say-hello")
    await expect(tab.messages("user_message")).to_have_count(1)
    await expect(tab.messages("user_message")).to_contain_text("hello from a starter")
    await expect(tab.messages("assistant_message").last).to_contain_text("You said: hello from a starter")

    # A slow reply grows on the page word by word before it ends.
    await tab.send("slow 6")
    reply = tab.messages("assistant_message").last
    seen: list[str] = []
    while "w5" not in (text := (await reply.inner_text()).strip()) and len(seen) < 400:
        if not seen or seen[-1] != text:
            seen.append(text)
        await tab.page.wait_for_timeout(50)
    partial = [t for t in seen if t.startswith("w0") and "w5" not in t]
    assert len({t.count("w") for t in partial}) >= 3, seen  # at least three lengths shown
    await expect(tab.messages("user_message")).to_have_count(2)
    await tab.shot("streamed")
    await tab.check_clean()


async def test_stop_keeps_the_partial_reply(tab, make_user):
    await tab.sign_in(make_user())
    await tab.send("slow 40")
    await expect(tab.messages("assistant_message").last).to_contain_text("w0")
    reply = tab.messages("assistant_message").nth(await tab.messages("assistant_message").count() - 1)
    await expect(reply).to_contain_text("w2")
    await tab.page.click("#stop-button")
    await expect(tab.page.locator("#chat-submit")).to_be_visible()
    stopped = (await reply.inner_text()).strip()
    await tab.page.wait_for_timeout(1500)  # five more words' time: nothing more arrives
    assert (await reply.inner_text()).strip() == stopped and "w39" not in stopped, stopped
    # Chainlit's note for a stopped task follows it.
    await expect(tab.messages("assistant_message").last).to_contain_text("Task manually stopped.")
    # The chat goes on after a stop.
    await tab.send("after the stop")
    await expect(tab.messages("assistant_message").last).to_contain_text("You said: after the stop")
    await tab.check_clean()


async def test_a_thread_resumes_from_the_sidebar(tab, make_user):
    await tab.sign_in(make_user())
    await tab.send("first thread")
    await expect(tab.messages("assistant_message").last).to_contain_text("You said: first thread")
    first = tab.page.locator("#thread-history li[id^=thread-]")
    await expect(first).to_have_count(1)
    first_id = await first.get_attribute("id")

    await tab.page.click("#new-chat-button")
    confirm = tab.page.locator("#confirm")
    if await confirm.count():
        await confirm.click()
    await expect(tab.messages("user_message")).to_have_count(0)
    await tab.send("second thread")
    await expect(tab.messages("assistant_message").last).to_contain_text("You said: second thread")
    await expect(tab.page.locator("#thread-history li[id^=thread-]")).to_have_count(2)

    await tab.page.click(f"#{first_id}")
    await expect(tab.page).to_have_url(re.compile(re.escape(PREFIX) + "/thread/"))
    await expect(tab.messages("user_message")).to_have_count(1)
    await expect(tab.messages("user_message")).to_contain_text("first thread")
    await expect(tab.messages("assistant_message")).to_contain_text(["You said: first thread"])
    # The resumed thread takes new messages, and a reload shows it whole, once.
    await tab.send("back in the first")
    await expect(tab.messages("assistant_message").last).to_contain_text("You said: back in the first")
    await tab.page.reload()
    await expect(tab.messages("user_message")).to_have_count(2)
    await tab.shot("resumed")
    await tab.check_clean()


async def test_an_ask_is_answered_from_the_composer_and_its_answer_shows_once(tab, make_user):
    await tab.sign_in(make_user())
    await tab.page.click("#starter-ask-me")
    await expect(tab.messages("assistant_message").last).to_contain_text("What is your name?")
    await tab.send("Zoe")
    await expect(tab.messages("assistant_message").last).to_contain_text("Nice to meet you, Zoe.")
    await expect(tab.messages("user_message").filter(has_text="Zoe")).not_to_have_count(0)
    # The answer once: it comes back under the id Chainlit's client drew it under.
    users = tab.messages("user_message")
    shown = [await users.nth(i).inner_text() for i in range(await users.count())]
    assert shown == ["ask", "Zoe"], shown
    await tab.shot("ask")
    await tab.check_clean()


async def test_an_action_button_runs_its_callback_once(tab, make_user):
    await tab.sign_in(make_user())
    await tab.send("action")
    button = tab.page.get_by_role("button", name="Wave back")
    await expect(button).to_be_visible()
    await button.click()
    await expect(tab.messages("assistant_message").last).to_contain_text("Waved 2 times.")
    await tab.page.wait_for_timeout(500)
    await expect(tab.messages("assistant_message").filter(has_text="Waved 2 times.")).to_have_count(1)
    await tab.shot("action")
    await tab.check_clean()


async def test_a_sent_message_is_edited_and_answered_again(tab, make_user):
    """features.edit_message is on for a hooks-API app with on_message: Chainlit's pencil
    edits the message, the conversation after it is replaced, and a reload agrees."""
    await tab.sign_in(make_user())
    for text in ("first", "second"):
        await tab.send(text)
        await expect(tab.messages("assistant_message").last).to_contain_text(f"You said: {text}")
    first = tab.messages("user_message").first
    await first.hover()
    await first.locator(".edit-message").click()
    await tab.page.fill("#edit-chat-input", "first, edited")
    await tab.page.click(".confirm-edit")
    await expect(tab.messages("assistant_message").last).to_contain_text("You said: first, edited")
    await expect(tab.messages("user_message")).to_have_count(1)
    await expect(tab.messages("assistant_message").filter(has_text="You said: second")).to_have_count(0)
    # A new page (Chainlit's stays at its root for a new chat) reopens the thread from the list.
    await tab.page.reload()
    thread = tab.page.locator("#thread-history li[id^=thread-]")
    await expect(thread).to_have_count(1)
    await thread.click()
    await expect(tab.page).to_have_url(re.compile(re.escape(PREFIX) + "/thread/"))
    await expect(tab.messages("user_message")).to_have_count(1)
    await expect(tab.messages("user_message")).to_contain_text("first, edited")
    await expect(tab.messages("assistant_message").filter(has_text="You said: first, edited")).to_have_count(
        1
    )
    await expect(tab.messages("assistant_message").filter(has_text="You said: second")).to_have_count(0)
    await tab.shot("edited")
    await tab.check_clean()


async def test_thumbs_up_on_a_reply_is_stored_and_shown_again_after_a_reload(app_tab, make_user):
    """Chainlit's frontend shows thumbs on a finished run's last reply (Tether draws the run
    on the wire); the click is stored on that reply, and a reload shows it given."""
    kind, tab = app_tab
    _, greeting, message, answer = FEEDBACK_APPS[kind]
    user = make_user()
    await tab.sign_in(user)
    if greeting:  # the composer takes a message once the chat's start has shown it
        await expect(tab.messages("assistant_message").first).to_contain_text(greeting)
    await tab.send(message)
    reply = tab.messages("assistant_message").filter(has_text=answer)
    await expect(reply).to_have_count(1)
    up = reply.locator(".positive-feedback-off")
    await expect(up).to_be_visible()
    await expect(up).to_be_enabled()
    # The user's own message has none.
    await expect(tab.messages("user_message").locator(".positive-feedback-off")).to_have_count(0)
    await up.click()
    await tab.page.locator("[role=dialog] textarea").fill("Right answer.")
    await tab.page.click("#submit-feedback")
    await expect(reply.locator(".positive-feedback-on")).to_be_visible()
    await wait_until_async(lambda: _stored_is(user, [(1, "Right answer.")]))
    rows = await stored_feedback(user)
    assert [(v, c, t) for v, c, t, _ in rows] == [(1, "Right answer.", "assistant_message")], rows
    assert answer in rows[0][3], rows

    # A new page (Chainlit's stays at its root for a new chat) resumes the thread from the list.
    await tab.page.reload()
    thread = tab.page.locator("#thread-history li[id^=thread-]")
    await expect(thread).to_have_count(1)
    await thread.click()
    await expect(tab.page).to_have_url(re.compile(re.escape(PREFIX) + "/thread/"))
    reply = tab.messages("assistant_message").filter(has_text=answer)
    await expect(reply).to_have_count(1)
    await expect(reply.locator(".positive-feedback-on")).to_be_visible()
    await expect(reply.locator(".negative-feedback-off")).to_be_visible()
    await tab.shot(f"feedback-{kind}")
    await tab.check_clean()


async def _stored_is(user, wanted: list[tuple[int, str]]) -> bool:
    return [(v, c) for v, c, _t, _o in await stored_feedback(user)] == wanted
