"""The sidebar's search box finds threads by what was said in them, in the page: Playwright
drives Debian's Chromium against a live daphne running the echo engine (``tests.apps.web_app``),
like ``test_web_ui.py``, whose page helpers this reuses.

Echo replies repeat the user's text, so the word only a reply has is its turn number: the
thread with two turns is the only one whose replies say "#2".
"""

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from playwright.async_api import Browser, expect

from tests.e2e.test_web_ui import (
    TIMEOUT_MS,
    Chat,
    _page_opener,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def web_server(server_factory, tmp_path_factory):
    return server_factory.start(
        CHAT_APP="tests.apps.web_app", ECHO_STATE_DIR=str(tmp_path_factory.mktemp("search-echo"))
    )


@pytest.fixture
async def open_chat(browser: Browser, web_server) -> AsyncIterator[Callable[[], Awaitable[Chat]]]:
    async for open_page in _page_opener(browser, web_server.url):
        yield open_page


expect.set_options(timeout=TIMEOUT_MS)


async def test_the_search_box_finds_a_thread_by_a_word_of_its_reply(open_chat, make_user):
    chat = await open_chat()
    await chat.sign_in(make_user())
    page = chat.page

    # Titles come without the markdown and the engine's directive lines.
    await chat.new_chat()
    await page.fill("#message-input", "!slow 0.01")
    await page.press("#message-input", "Shift+Enter")
    await page.keyboard.type("**Apples** and [pears](https://example.com)")
    await page.press("#message-input", "Enter")
    await chat.wait_reply("Echo #1: Apples and pears")
    await chat.send("more apples")
    await chat.wait_reply("Echo #2: more apples")
    await chat.new_chat()
    await chat.send("bananas")
    await chat.wait_reply("Echo #1: bananas")
    links = chat.thread_links
    await expect(links).to_have_text(["bananas", "Apples and pears"])

    # "2" is only in the first thread's second reply.
    await page.fill("#thread-search", "2")
    await expect(links).to_have_text(["Apples and pears"])
    # "Echo" is in every reply, in no name and no user message.
    await page.fill("#thread-search", "echo")
    await expect(links).to_have_text(["bananas", "Apples and pears"])
    await page.fill("#thread-search", "kiwi")
    await expect(links).to_have_count(0)
    await expect(chat.locator("#threads-empty")).to_have_text("No chats match.")
    await page.fill("#thread-search", "")
    await expect(links).to_have_count(2)
    await chat.shot("search-by-reply")
    await chat.assert_clean()
