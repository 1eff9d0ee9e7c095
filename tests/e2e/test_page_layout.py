"""The chat page's layout with content that grows after it is drawn, in Chromium against the
showcase app (``examples.showcase_app``): measured in the page, not eyeballed.

- A reply whose image and plot load after it is drawn ("report") ends inside the view while
  the user is at the bottom; reopening the thread lands at its end; while the user reads back,
  the view stays put and a "jump to latest" button takes them to the end.
- An ask's question stays visible while its panel is open, and the panel says what it asks.
- At 390 px wide nothing is wider than the viewport (the plot fits its card, the profile menu
  fits), and the message list does not scroll sideways.
- On a phone the composer stays one row while a file ask is open, also when the user typed
  while the turn ran (Stop shown, a narrow message box) and the ask then hid Stop.

Screenshots go under ``test-artifacts/screenshots/`` (``Chat.shot``).
"""

import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from playwright.async_api import Browser, ViewportSize, expect

from tests.e2e.test_web_ui import DESKTOP, PAGE_PROBES, PHONE, THREAD_URL, TIMEOUT_MS, Chat, eventually

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

REPORT = "Here is this week's report."

# The bottom of the last message, against the bottom of the scrolled list (px; >0: below it).
LAST_MESSAGE_BELOW = """() => {
  const list = document.querySelector("#messages");
  const items = list.querySelectorAll("#transcript > .msg, #pending > .msg");
  const last = items[items.length - 1];
  return Math.round(last.getBoundingClientRect().bottom - list.getBoundingClientRect().bottom);
}"""

# Every visible element whose right edge passes the viewport's, and how far the list scrolls sideways.
TOO_WIDE = """() => {
  const width = document.documentElement.clientWidth;
  const wide = [];
  for (const node of document.querySelectorAll("#chat *")) {
    const box = node.getBoundingClientRect();
    if (box.width && box.right > width + 1 && !node.closest(".visually-hidden")) {
      wide.push(`${node.tagName.toLowerCase()}.${[...node.classList].join(".")} right=${Math.round(box.right)}`);
    }
  }
  const list = document.querySelector("#messages");
  return { wide: wide.slice(0, 12), sideways: list.scrollWidth - list.clientWidth, width };
}"""


@pytest.fixture(scope="module")
def showcase_server(server_factory: Any) -> Any:
    return server_factory.start(CHAT_APP="examples.showcase_app")


@pytest.fixture
async def open_chat(browser: Browser, showcase_server: Any) -> AsyncIterator[Callable[..., Awaitable[Chat]]]:
    contexts = []

    async def open_page(viewport: ViewportSize = DESKTOP) -> Chat:
        context = await browser.new_context(viewport=viewport)
        context.set_default_timeout(TIMEOUT_MS)
        await context.add_init_script(PAGE_PROBES)
        contexts.append(context)
        return Chat(await context.new_page(), showcase_server.url)

    yield open_page
    for context in contexts:
        await context.close()


async def report_drawn(chat: Chat) -> None:
    """The report's image has loaded and its plot is drawn: the reply has its full height."""
    reply = chat.reply(REPORT)
    await expect(reply.locator(".element-plotly[data-rendered=true]")).to_have_count(1)
    await chat.page.wait_for_function(
        "() => [...document.querySelectorAll('#transcript img.element-image')].every(i => i.complete && i.naturalWidth)"
    )
    await expect(reply.locator(".element-text code")).to_be_visible()


async def assert_at_end(chat: Chat, what: str) -> None:
    """The last message's bottom is inside the list's view (a frame's margin for layout)."""
    await chat.page.wait_for_timeout(300)  # a frame or two for any resize to be followed
    below = await chat.page.evaluate(LAST_MESSAGE_BELOW)
    assert below <= 2, f"{what}: the last message ends {below} px below the visible area"


async def test_the_view_follows_a_reply_that_grows_and_reopening_lands_at_the_end(
    open_chat: Any, make_user: Any
) -> None:
    chat = await open_chat()
    await chat.sign_in(make_user())
    await chat.send("report")
    await report_drawn(chat)
    await assert_at_end(chat, "after the report's image and plot loaded")
    await chat.shot("layout-report-desktop")
    await expect(chat.page).to_have_url(THREAD_URL)

    # Reopened (a new page load), the thread lands at its end once everything has grown.
    await chat.reload()
    await report_drawn(chat)
    await assert_at_end(chat, "after reopening the thread")

    # Reading back: the view stays where the user put it while another tab of the thread
    # sends into it (its pending copy shows here); a button offers the latest.
    jump = chat.page.get_by_role("button", name="Jump to the latest message")
    await expect(jump).to_be_hidden()
    await chat.locator("#messages").evaluate("list => { list.scrollTop = 0; }")
    await expect(jump).to_be_visible()
    other = Chat(await chat.page.context.new_page(), chat.base_url)
    await other.open_thread(chat.page.url.rstrip("/").rsplit("/", 1)[-1])
    await other.send("hello there")
    await other.wait_reply("You said: hello there")
    await expect(chat.locator("#transcript > .msg-user", has_text="hello there")).to_have_count(1)
    assert await chat.locator("#messages").evaluate("list => list.scrollTop") < 50, (
        "the view left the user's place"
    )
    await chat.shot("layout-jump-to-latest")
    await jump.click()
    await assert_at_end(chat, "after jump to latest")
    await expect(jump).to_be_hidden()
    await expect(chat.locator("#message-input")).to_be_focused()
    await chat.assert_clean()


async def test_an_asks_question_stays_visible_while_its_panel_is_open(open_chat: Any, make_user: Any) -> None:
    chat = await open_chat(PHONE)
    await chat.sign_in(make_user())
    await chat.send("upload")
    panel = chat.locator("#ask-panel")
    await expect(panel).to_be_visible()
    question = chat.locator("#transcript > .msg-assistant .msg-body", has_text="Send me a photo.")
    await expect(question).to_be_in_viewport()
    await expect(panel).to_contain_text("Send me a photo.")
    await chat.shot("layout-ask-file-phone")

    await chat.reload()
    await expect(panel).to_be_visible()
    await expect(question).to_be_in_viewport()
    await expect(panel).to_contain_text("Send me a photo.")
    await chat.assert_clean()


# The composer's visible parts (its buttons and the message box): their vertical boxes.
COMPOSER_PARTS = """() => [...document.querySelectorAll("#composer .composer-row > *")]
  .filter((node) => node.getClientRects().length && !node.classList.contains("visually-hidden"))
  .map((node) => {
    const box = node.getBoundingClientRect();
    return { part: node.id || node.className, top: Math.round(box.top), height: Math.round(box.height) };
  })"""


async def assert_composer_one_row(chat: Chat, what: str) -> None:
    """The composer's parts sit on one line: none taller than a line of text and the buttons,
    their middles level (the message box two lines tall puts the buttons at its foot)."""
    parts = await chat.page.evaluate(COMPOSER_PARTS)
    middles = [part["top"] + part["height"] / 2 for part in parts]
    tallest = max(part["height"] for part in parts)
    assert tallest <= 44 and max(middles) - min(middles) <= 4, f"{what}: the composer is not one row: {parts}"


ASK_FRAME = re.compile(r'42\d*\["ask",')  # Socket.IO's EVENT packet (with an ack id) of an ask


async def test_the_phone_composer_stays_one_row_while_a_file_ask_is_open(
    open_chat: Any, make_user: Any
) -> None:
    """The user types while the turn runs (Stop shown: a narrow message box), then the file
    ask pauses the turn (Stop hidden): the composer is one row, the box empty or not."""
    chat = await open_chat(PHONE)
    page = chat.page
    box = chat.locator("#message-input")
    # The ask and what follows it (the turn's pause) are held back while the user types.
    held: list[str | bytes] = []
    sockets: list[Any] = []
    holding = True

    def route(ws: Any) -> None:
        sockets.append(ws)
        server = ws.connect_to_server()

        def from_server(message: str | bytes) -> None:
            if holding and (held or ASK_FRAME.match(str(message))):
                held.append(message)
            else:
                ws.send(message)

        server.on_message(from_server)

    await page.route_web_socket(re.compile(r"/ws/socket\.io/"), route)
    await chat.sign_in(make_user())
    await chat.send("upload")

    async def ask_held() -> bool:
        return bool(held)

    await eventually(ask_held, True)
    await expect(chat.locator("#stop")).to_be_visible()
    await expect(chat.locator("#ask-panel")).to_be_hidden()
    await box.press_sequentially("x")
    await box.press("Backspace")
    await assert_composer_one_row(chat, "emptied while Stop shows")
    await box.press_sequentially("A photo of my cat")
    narrow = await box.evaluate("node => node.getBoundingClientRect().height")
    assert narrow > 44, f"the text fits one line of the narrow box ({narrow} px): the test shows nothing"

    holding = False
    for message in held:
        sockets[-1].send(message)
    await expect(chat.locator("#ask-panel")).to_be_visible()
    await expect(chat.locator("#stop")).to_be_hidden()
    await page.wait_for_timeout(100)  # a frame for the box to follow its new width
    await assert_composer_one_row(chat, "with text, the ask open")
    await box.fill("")
    await assert_composer_one_row(chat, "empty, the ask open")
    await chat.shot("layout-ask-file-phone-composer")
    await chat.assert_clean()


@pytest.mark.parametrize("theme", ["light", "dark"])
async def test_nothing_is_wider_than_a_phone(open_chat: Any, make_user: Any, theme: str) -> None:
    chat = await open_chat(PHONE)
    await chat.page.emulate_media(color_scheme=theme)
    await chat.sign_in(make_user())
    # The first screen's profile menu, open, fits too.
    await chat.locator("#chat-profile").click()
    await expect(chat.page.get_by_role("listbox", name="Profile")).to_be_visible()
    found = await chat.page.evaluate(TOO_WIDE)
    await chat.shot(f"layout-profile-menu-phone-{theme}")
    assert found["wide"] == [], f"with the profile menu open: {found['wide']}"
    await chat.page.keyboard.press("Escape")
    await chat.send("report")
    await report_drawn(chat)
    found = await chat.page.evaluate(TOO_WIDE)
    await chat.shot(f"layout-report-phone-{theme}")
    assert found["wide"] == [], f"wider than the {found['width']} px viewport: {found['wide']}"
    assert found["sideways"] <= 0, f"the message list scrolls {found['sideways']} px sideways"
    # The plot is drawn at its card's width, not plotly.js's default 700 px.
    sizes = await chat.locator(".element-plot").evaluate(
        "plot => [plot.getBoundingClientRect().width, plot.querySelector('.main-svg').getBoundingClientRect().width]"
    )
    assert abs(sizes[0] - sizes[1]) <= 2, f"plot card {sizes[0]} px, drawing {sizes[1]} px"
    await chat.send("upload")
    await expect(chat.locator("#ask-panel")).to_be_visible()
    found = await chat.page.evaluate(TOO_WIDE)
    assert found["wide"] == [], f"with the file ask open: {found['wide']}"
    assert re.search(r"\S", await chat.locator("#ask-panel").inner_text())
