"""Elements in the web UI, end to end: Playwright drives Debian's Chromium against a live
daphne running ``tests.apps.elements_app``. One reply carries an image, a file, a text and a
plot inline and a PDF and a text in the side panel: the image is shown, the file link
downloads the file, the text is a code block, the plot is drawn by the vendored plotly.js,
the side panel opens from its link and closes with its button and with Esc (the focus goes
back to the link), all of it again after a reload. A user attaches a CSV (the server allows
it) and the app's ``on_message`` sees it. The page breaks no CSP rule and asks no other origin
(``Chat.assert_clean``).
"""

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser, Page, expect

from tests.e2e.test_web_ui import DESKTOP, PAGE_PROBES, TIMEOUT_MS, Chat

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

REPLY = "Here are your elements."


@pytest.fixture(scope="module")
def elements_server(server_factory, tmp_path_factory):
    return server_factory.start(
        CHAT_APP="tests.apps.elements_app",
        ELEMENTS_DIR=str(tmp_path_factory.mktemp("ui-elements")),
        UPLOAD_ALLOWED_TYPES="image/*,application/pdf,text/plain,text/csv",
    )


@pytest.fixture
async def open_chat(browser: Browser, elements_server) -> AsyncIterator[Callable[[], Awaitable[Chat]]]:
    contexts = []

    async def open_page() -> Chat:
        context = await browser.new_context(viewport=DESKTOP, accept_downloads=True)
        context.set_default_timeout(TIMEOUT_MS)
        await context.add_init_script(PAGE_PROBES)
        contexts.append(context)
        return Chat(await context.new_page(), elements_server.url)

    yield open_page
    for context in contexts:
        await context.close()


def reply_with_elements(page: Page):
    return page.locator("#transcript > .msg-assistant").filter(
        has=page.locator(".msg-body", has_text=re.compile(rf"^\s*{re.escape(REPLY)}\s*$"))
    )


async def check_elements(chat: Chat, shot: str) -> None:
    """The reply's elements, as the page shows them."""
    reply = reply_with_elements(chat.page)
    image = reply.locator("img.element-image")
    await expect(image).to_have_attribute("alt", "square.png")
    await expect(image).to_have_attribute("loading", "lazy")
    await expect(image).to_be_visible()
    await chat.page.wait_for_function(
        "() => document.querySelector('img.element-image')?.naturalWidth === 160"
    )
    link = reply.locator("a.element-download", has_text="notes.csv")
    await expect(link).to_contain_text("8 bytes")
    await expect(reply.locator(".element-text code")).to_contain_text('return "world"')
    await expect(reply.locator(".element-text .code-lang")).to_have_text("python")
    # The plot is drawn (plotly.js loaded once, from this origin), with its bars.
    await expect(reply.locator(".element-plotly[data-rendered=true]")).to_have_count(1)
    await expect(reply.locator(".element-plot .main-svg").first).to_be_visible()
    await expect(reply.locator(".element-plot .bars path")).to_have_count(3)
    # The side elements are links under the message, not shown inline.
    await expect(reply.locator("button.element-link")).to_have_text(["report.pdf", "side-notes.txt"])
    await expect(reply.locator("iframe")).to_have_count(0)
    await chat.shot(shot)

    # The file link downloads the file.
    async with chat.page.expect_download() as download_info:
        await link.click()
    download = await download_info.value
    assert download.suggested_filename == "notes.csv"
    assert await asyncio.to_thread(Path(await download.path()).read_bytes) == b"a,b\n1,2\n"


async def check_side_panel(chat: Chat, shot: str) -> None:
    reply = reply_with_elements(chat.page)
    panel = chat.locator("#element-panel")
    await expect(panel).to_be_hidden()
    pdf_link = reply.locator("button.element-link", has_text="report.pdf")
    await pdf_link.click()
    await expect(panel).to_be_visible()
    assert await panel.evaluate("node => node.tagName") == "ASIDE"
    await expect(panel).to_have_attribute("aria-labelledby", "element-panel-title")
    await expect(pdf_link).to_have_attribute("aria-expanded", "true")
    await expect(chat.locator("#element-panel-title")).to_have_text("report.pdf")
    await expect(panel.locator("iframe.element-pdf")).to_have_attribute(
        "src", re.compile(r"^/api/elements/[0-9a-f-]{36}#page=1$")
    )
    await expect(panel.locator(".element-panel-close")).to_be_focused()
    await chat.shot(shot)
    await chat.page.keyboard.press("Escape")
    await expect(panel).to_be_hidden()
    await expect(pdf_link).to_be_focused()
    await expect(pdf_link).to_have_attribute("aria-expanded", "false")

    text_link = reply.locator("button.element-link", has_text="side-notes.txt")
    await text_link.click()
    await expect(panel.locator(".element-text code")).to_have_text("Side panel text")
    await panel.locator(".element-panel-close").click()
    await expect(panel).to_be_hidden()
    await expect(text_link).to_be_focused()


async def test_elements_are_shown_inline_and_in_the_side_panel_after_a_reload_too(
    open_chat: Any, make_user: Any
) -> None:
    chat = await open_chat()
    await chat.sign_in(make_user())
    await chat.send("elements")
    await chat.wait_reply("Elements sent.")
    await check_elements(chat, "60-elements-inline")
    await check_side_panel(chat, "61-elements-side-panel")

    await chat.reload()
    await chat.wait_reply("Elements sent.")
    await check_elements(chat, "62-elements-after-reload")
    await check_side_panel(chat, "63-elements-side-panel-after-reload")
    # The dark theme (the system's, by default) draws them on its own palette.
    await chat.page.emulate_media(color_scheme="dark")
    await expect(chat.locator("html")).to_have_attribute("data-theme", "dark")
    await chat.shot("65-elements-dark")

    await chat.assert_clean()  # no CSP violation (plotly.js included), no other origin


async def test_a_user_attaches_a_file_and_on_message_sees_it(
    open_chat: Any, make_user: Any, tmp_path
) -> None:
    chat = await open_chat()
    await chat.sign_in(make_user())
    await expect(chat.locator("label.attach")).to_have_attribute("title", "Attach files")
    accept = await chat.locator("#file-input").get_attribute("accept")
    assert accept is not None and "text/csv" in accept.split(",")
    csv = tmp_path / "table.csv"
    csv.write_bytes(b"x,y\n1,2\n")
    await chat.locator("#file-input").set_input_files(str(csv))
    await expect(chat.locator("#attachments .attachment-name")).to_have_text("table.csv")
    await chat.send("here is a table")
    saw = "on_message saw: table.csv|text/csv|8|b'x,y\\n1,2\\n'|True"
    await chat.wait_reply(saw)
    user_message = chat.locator("#transcript > .msg-user")
    await expect(user_message.locator("a.element-download")).to_contain_text("table.csv")
    await chat.shot("64-elements-user-upload")
    await chat.reload()
    await expect(chat.locator("#transcript > .msg-user a.element-download")).to_contain_text("table.csv")
    await chat.assert_clean()


async def test_axe_finds_nothing_with_elements_and_the_side_panel_in_both_themes(
    open_chat: Any, make_user: Any
) -> None:
    from tests.e2e.test_accessibility import check_both_themes

    chat = await open_chat()
    await chat.sign_in(make_user())
    await chat.send("elements")
    await chat.wait_reply("Elements sent.")
    reply = reply_with_elements(chat.page)
    await expect(reply.locator(".element-plotly[data-rendered=true]")).to_have_count(1)
    await check_both_themes(chat, "elements")
    await reply.locator("button.element-link", has_text="side-notes.txt").click()
    await expect(chat.locator("#element-panel .element-text code")).to_have_text("Side panel text")
    await check_both_themes(chat, "elements-side-panel")
    await chat.assert_clean()
