"""Issue 25 item 7, the page's small defects, each checked in Chromium where a user meets it:
the PDF's "Open the PDF" link clear of its download chip, a text element's code block padded,
a stop said once, no thumbs or Copy on what is not a reply (greetings, notices, questions),
the focus kept after an action ask is answered, a queued send still "Queued" after a reload,
the streaming cursor at the end of the text's line, Esc in the sidebar search clearing it
(not stopping the reply), and a directive with words after it on its one line.

(Deleting a thread is confirmed in the page's own dialog, never the browser's box: that is
``test_web_ui.test_the_sidebar_searches_renames_and_deletes_threads``.)
"""

import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from playwright.async_api import Browser, expect

from tests.e2e.test_web_ui import Chat, _page_opener

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PageOpener = Callable[..., Awaitable[Chat]]


@pytest.fixture(scope="module")
def showcase_server(server_factory: Any) -> Any:
    return server_factory.start(CHAT_APP="examples.showcase_app")


@pytest.fixture(scope="module")
def engine_server(server_factory: Any, tmp_path_factory: Any) -> Any:
    return server_factory.start(
        CHAT_APP="tests.apps.web_app", ECHO_STATE_DIR=str(tmp_path_factory.mktemp("echo"))
    )


@pytest.fixture
async def open_showcase(browser: Browser, showcase_server: Any) -> AsyncIterator[PageOpener]:
    async for open_page in _page_opener(browser, showcase_server.url):
        yield open_page


@pytest.fixture
async def open_engine(browser: Browser, engine_server: Any) -> AsyncIterator[PageOpener]:
    async for open_page in _page_opener(browser, engine_server.url):
        yield open_page


async def box(locator: Any) -> dict[str, float]:
    found = await locator.bounding_box()
    assert found is not None, f"{locator} is not shown"
    return dict(found)


def overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    return (
        a["x"] < b["x"] + b["width"]
        and b["x"] < a["x"] + a["width"]
        and a["y"] < b["y"] + b["height"]
        and b["y"] < a["y"] + a["height"]
    )


async def not_a_reply(chat: Chat, text: str) -> None:
    """The assistant message ``text`` offers neither thumbs nor Copy (it answers nothing)."""
    message = chat.locator("#transcript > .msg-assistant").filter(has_text=text)
    await expect(message).to_have_count(1)
    await expect(message.locator(".copy-message")).to_have_count(0)
    await expect(message.locator(".feedback")).to_have_count(0)


async def test_the_report_the_greeting_and_an_action_ask(open_showcase: PageOpener, make_user: Any) -> None:
    chat = await open_showcase()
    await chat.sign_in(make_user())
    greeting = "Hi! You are talking to the Helper profile."
    await chat.send("report")
    await chat.wait_reply("Here is this week's report.")
    report = chat.reply("Here is this week's report.")

    # The PDF, in the side panel: "Open the PDF" and the download chip both whole, apart.
    await report.get_by_role("button", name=re.compile("guide.pdf")).click()
    panel = chat.locator("#element-panel")
    open_pdf = panel.get_by_role("link", name="Open the PDF")
    download = panel.locator(".element-download")
    assert not overlap(await box(open_pdf), await box(download)), "Open the PDF is painted under the chip"
    await panel.get_by_role("button", name="Close").click()

    # The text element's code block: its text is inset from the block's edges.
    pre = report.locator(".element-text pre")
    await expect(pre).to_contain_text('"type": "bar"')
    inset = await pre.evaluate(
        """pre => { const s = getComputedStyle(pre); return [parseFloat(s.paddingLeft), parseFloat(s.paddingTop)]; }"""
    )
    assert min(inset) >= 8, f"the text element's code block has {inset} px of padding"

    # A reply has thumbs and Copy; the greeting answers nothing and has neither.
    await expect(report.locator(".copy-message")).to_have_count(1)
    await expect(report.get_by_role("button", name=re.compile("^(Good|Bad) reply$"))).to_have_count(2)
    await not_a_reply(chat, greeting)

    # An action ask: answered by a click, the focus goes back to the composer (not <body>),
    # and the question, which answers nothing, has no thumbs or Copy.
    await chat.send("quiz")
    question = chat.reply("Which language is the code in?")
    await not_a_reply(chat, "Which language is the code in?")
    await question.get_by_role("button", name="Python").click()
    await chat.wait_reply("Right!")
    await expect(chat.locator("#message-input")).to_be_focused()
    await not_a_reply(chat, "Selected: Python")
    await chat.reload()
    await not_a_reply(chat, greeting)
    await not_a_reply(chat, "Selected: Python")
    await chat.assert_clean()


async def test_a_stop_the_cursor_and_the_sidebar_search(open_engine: PageOpener, make_user: Any) -> None:
    chat = await open_engine()
    await chat.sign_in(make_user())
    await not_a_reply(chat, "Hello! I echo what you send.")

    # A directive and the words after it on one line: the words are the message.
    await chat.send("!slow 0.05 hello there")
    await chat.wait_reply("Echo #1: hello there")

    # The streaming cursor ends the text's last line, not a line of its own.
    await chat.send("!slow 0.3\nthis long reply will never get to the end of all of its many words")
    await expect(chat.streaming.locator(".msg-body")).to_contain_text("this long reply")
    cursor = chat.streaming.locator(".cursor")
    line = await cursor.evaluate(
        """cursor => { const r = document.createRange(); r.selectNodeContents(cursor.parentElement);
             const rects = [...r.getClientRects()].filter(x => x.width > 0 && !cursor.contains(document.elementFromPoint(x.x + 1, x.y + 1)));
             const c = cursor.getBoundingClientRect();
             return {tag: cursor.parentElement.tagName, text: rects.at(-1)?.bottom ?? 0, cursorTop: c.top, cursorBottom: c.bottom}; }"""
    )
    assert line["tag"] == "P" and line["cursorTop"] < line["text"], (
        f"the cursor sits on a line of its own: {line}"
    )

    # Esc in the sidebar search clears the search; the reply goes on.
    search = chat.locator("#thread-search")
    await search.fill("kiwi")
    await search.press("Escape")
    await expect(search).to_have_value("")
    await expect(chat.streaming).to_have_count(1)
    await expect(chat.locator("#stop")).to_be_visible()

    # A stop says so once: the reply kept as far as it got, marked, and no second message.
    await chat.locator("#message-input").focus()
    await chat.page.keyboard.press("Escape")
    await expect(chat.stopped_replies).to_have_count(1)
    await expect(chat.streaming).to_have_count(0)
    await expect(chat.locator("#transcript .msg-body", has_text="Task manually stopped.")).to_be_hidden()
    shown = await chat.page.locator("#transcript").inner_text()
    assert len(re.findall(r"stopped", shown, re.IGNORECASE)) == 1, shown
    await chat.reload()
    await expect(chat.stopped_replies).to_have_count(1)
    shown = await chat.page.locator("#transcript").inner_text()
    assert len(re.findall(r"stopped", shown, re.IGNORECASE)) == 1, shown
    await chat.assert_clean()


async def test_a_queued_send_is_still_queued_after_a_reload(open_engine: PageOpener, make_user: Any) -> None:
    chat = await open_engine()
    await chat.sign_in(make_user())
    await chat.send("!slow 0.3\nthe first message takes a while to answer, word after word after word")
    await expect(chat.streaming).to_have_count(1)
    await chat.send("the second message")
    queued = chat.locator('#pending > .msg[data-state="queued"]')
    await expect(queued).to_have_text(re.compile("the second message"))
    await expect(queued.locator(".msg-status")).to_have_text(re.compile("^Queued"))
    await chat.reload()
    await expect(queued).to_have_text(re.compile("the second message"))
    await expect(queued.locator(".msg-status")).to_have_text(re.compile("^Queued"))
    await chat.wait_reply("Echo #2: the second message")
    await chat.assert_clean()


@pytest.fixture(scope="module")
def hooks_server(server_factory: Any) -> Any:
    """A hooks-API app whose ``slowstream N SECONDS`` streams N tokens, a pause before each."""
    return server_factory.start(CHAT_APP="tests.apps.lifecycle_app")


@pytest.fixture
async def open_hooks(browser: Browser, hooks_server: Any) -> AsyncIterator[PageOpener]:
    async for open_page in _page_opener(browser, hooks_server.url):
        yield open_page


async def test_a_stop_of_a_hooks_api_reply_is_said_once(open_hooks: PageOpener, make_user: Any) -> None:
    chat = await open_hooks()
    await chat.sign_in(make_user())
    await not_a_reply(chat, "greeting")
    await chat.send("slowstream 60 0.1")
    await expect(chat.streaming.locator(".msg-body")).to_contain_text("t2")
    await chat.page.keyboard.press("Escape")
    await expect(chat.stopped_replies).to_have_count(1)
    notice = chat.locator("#transcript > .msg-assistant").filter(has_text="Task manually stopped.")
    await expect(notice).to_have_count(1)
    await expect(notice).to_be_hidden()
    await chat.reload()
    await expect(chat.stopped_replies).to_have_count(1)
    await expect(notice).to_be_hidden()
    await chat.assert_clean()
