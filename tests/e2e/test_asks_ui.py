"""Action buttons and asks in the web UI, end to end: Playwright drives Debian's Chromium against
a live daphne running ``tests.apps.asks_app``. The user clicks an action button, answers a text
ask with the composer and an action ask with its buttons (by keyboard), answers an ask after
reloading the page in the middle of it, and after the network dropped in the middle of it; a
file ask takes a picture. The database agrees with the screen. Screenshots go to
``test-artifacts/screenshots/``."""

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from playwright.async_api import Browser, expect

from tests.e2e.test_web_ui import Chat, _page_opener
from tests.media_app.photos import photo
from threads_app.models import Ask

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def asks_server(server_factory) -> Any:
    return server_factory.start(CHAT_APP="tests.apps.asks_app")


@pytest.fixture
async def open_chat(browser: Browser, asks_server) -> AsyncIterator[Callable[[], Awaitable[Chat]]]:
    async for open_page in _page_opener(browser, asks_server.url):
        yield open_page


@sync_to_async
def ask_states(user: Any) -> list[str]:
    return list(Ask.objects.filter(user=user).order_by("created_at").values_list("state", flat=True))


def panel(chat: Chat):
    return chat.locator("#ask-panel")


async def test_an_action_button_runs_its_callback_once(open_chat, make_user) -> None:
    chat = await open_chat()
    await chat.sign_in(make_user())
    await chat.send("buttons")
    await chat.wait_reply("Pick a colour")
    buttons = chat.reply("Pick a colour").locator(".msg-buttons")
    await expect(buttons).to_have_attribute("role", "group")
    red = buttons.get_by_role("button", name="Red")
    await expect(red).to_have_attribute("title", "The red one")
    await chat.shot("asks-action-buttons")
    await red.click()
    await chat.wait_reply("Colour: red")
    # The "Use once" callback removes its button; the others stay, also after a reload.
    await buttons.get_by_role("button", name="Use once").click()
    await chat.wait_reply("Used once.")
    await expect(buttons.get_by_role("button", name="Use once")).to_have_count(0)
    await chat.reload()
    kept = chat.reply("Pick a colour").locator(".msg-buttons")
    await expect(kept.get_by_role("button")).to_have_text(["Red", "Blue"])
    await kept.get_by_role("button", name="Blue").click()
    await chat.wait_reply("Colour: blue")
    await expect(chat.reply("Colour: red")).to_have_count(1)
    await chat.assert_clean()


async def test_a_text_ask_is_answered_with_the_composer(open_chat, make_user) -> None:
    user = make_user()
    chat = await open_chat()
    await chat.sign_in(user)
    await chat.send("ask name")
    await chat.wait_reply("What is your name?")
    await expect(panel(chat)).to_be_visible()
    await expect(panel(chat).locator(".ask-question")).to_contain_text("What is your name?")
    await expect(panel(chat)).to_contain_text("Your next message is the answer")
    await expect(panel(chat).locator(".ask-timer")).to_contain_text("seconds left to answer")
    await expect(chat.locator("#message-input")).to_have_attribute("placeholder", "Type your answer")
    await chat.shot("asks-text-ask")
    await chat.send("Ada")
    await chat.wait_reply("Hello, Ada!")
    await expect(panel(chat)).to_be_hidden()
    assert ["user", "Ada"] in await chat.transcript()
    assert await ask_states(user) == ["answered"]
    await chat.assert_clean()


async def test_an_action_ask_is_answered_by_keyboard(open_chat, make_user) -> None:
    chat = await open_chat()
    await chat.sign_in(make_user())
    await chat.send("ask pick")
    await chat.wait_reply("Shall we go on?")
    choices = chat.reply("Shall we go on?").locator(".ask-choice")
    await expect(choices).to_have_text(["Go on", "Halt"])
    await expect(choices.first).to_be_focused()  # the panel puts the focus on the first choice
    await chat.shot("asks-action-ask")
    await chat.page.keyboard.press("Tab")
    await expect(choices.nth(1)).to_be_focused()
    await chat.page.keyboard.press("Enter")
    await chat.wait_reply("Chosen: halt {'go': False}")
    await expect(panel(chat)).to_be_hidden()
    await chat.wait_reply("Selected: Halt")
    await expect(chat.locator(".ask-choice")).to_have_count(0)
    await chat.assert_clean()


async def test_an_ask_survives_a_reload_and_is_answered_after_it(open_chat, make_user) -> None:
    user = make_user()
    chat = await open_chat()
    await chat.sign_in(user)
    await chat.send("ask name")
    await chat.wait_reply("What is your name?")
    await expect(panel(chat)).to_be_visible()
    await chat.reload()
    await expect(panel(chat)).to_be_visible()
    await expect(chat.locator("#message-input")).to_have_attribute("placeholder", "Type your answer")
    await chat.shot("asks-after-reload")
    await chat.send("Grace")
    await chat.wait_reply("Hello, Grace!")
    await expect(panel(chat)).to_be_hidden()
    assert await ask_states(user) == ["answered"]
    # An action ask after a reload too.
    await chat.send("ask pick")
    await chat.wait_reply("Shall we go on?")
    await chat.reload()
    await chat.reply("Shall we go on?").get_by_role("button", name="Go on").click()
    await chat.wait_reply("Chosen: go {'go': True}")
    assert await ask_states(user) == ["answered", "answered"]
    await chat.assert_clean()


async def test_an_ask_survives_the_network_dropping(open_chat, make_user) -> None:
    chat = await open_chat()
    await chat.sign_in(make_user())
    await chat.send("ask name")
    await chat.wait_reply("What is your name?")
    context = chat.page.context
    await context.set_offline(True)
    await chat.drop_socket()
    await expect(chat.locator("body")).to_have_attribute("data-connection", "down")
    await chat.shot("asks-offline")
    await context.set_offline(False)
    await chat.wait_connected()
    await expect(panel(chat)).to_be_visible()
    await chat.send("Linus")
    await chat.wait_reply("Hello, Linus!")
    await expect(panel(chat)).to_be_hidden()
    await chat.assert_clean()


async def test_a_file_ask_takes_a_picture(open_chat, make_user, tmp_path) -> None:
    chat = await open_chat()
    await chat.sign_in(make_user())
    await chat.send("ask file")
    await chat.wait_reply("Send a PNG picture")
    picker = panel(chat).get_by_label("Choose files")
    await expect(picker).to_have_attribute("accept", "image/png")
    await expect(panel(chat)).to_contain_text("Up to 2 files of at most 1 MB each")
    picture = tmp_path / "dot.png"
    picture.write_bytes(photo("image/png", 3000))
    await picker.set_input_files(str(picture))
    await chat.shot("asks-file-ask")
    await panel(chat).get_by_role("button", name="Send files").click()
    await chat.wait_reply("Files: dot.png image/png 3000 3000")
    await expect(panel(chat)).to_be_hidden()
    await chat.assert_clean()
