"""The chat settings panel in the web UI (Playwright, Debian's Chromium) against daphne running
``tests.apps.settings_app``, whose replies say the settings they were made with: the user
opens the panel, changes an input of every kind (with the keyboard where it is a keyboard
control), sees a value the server refuses explained next to its control, confirms, and the
app's next reply uses the new values; a reload shows the panel with them; Cancel forgets.
Screenshots go where ``test_web_ui``'s do."""

import re
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from playwright.async_api import Browser, expect

from tests.e2e.test_web_ui import Chat, _page_opener
from threads_app.models import Thread

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

READY = "Ready with model=small stream=True temperature=0.5 persona=helpful max_words=100 topics=news"
CHANGED = "model=large stream=False temperature=0.8 persona=terse pirate max_words=20 topics=sport,weather"


@pytest.fixture(scope="module")
def settings_server(server_factory: Any) -> Any:
    return server_factory.start(CHAT_APP="tests.apps.settings_app")


@pytest.fixture
async def open_chat(browser: Browser, settings_server: Any):  # the fixture
    async for open_page in _page_opener(browser, settings_server.url):
        yield open_page


@sync_to_async
def saved_settings(user: Any) -> dict[str, Any]:
    settings: dict[str, Any] = Thread.objects.get(owner=user).chat_settings
    return settings


def panel(chat: Chat) -> Any:
    return chat.page.get_by_role("dialog", name="Chat settings")


async def open_panel(chat: Chat) -> Any:
    await chat.page.get_by_role("button", name="Chat settings").click()
    dialog = panel(chat)
    await expect(dialog).to_be_visible()
    return dialog


async def tags_shown(dialog: Any) -> list[str]:
    tags: list[str] = await dialog.locator(".settings-tag > span").all_inner_texts()
    return tags


async def test_change_every_input_confirm_the_reply_uses_it_and_a_reload_keeps_it(
    open_chat: Any, make_user: Any
) -> None:
    user = make_user()
    chat = await open_chat()
    await chat.sign_in(user)
    await chat.wait_reply(READY)
    button = chat.page.get_by_role("button", name="Chat settings")
    await expect(button).to_be_visible()
    await expect(button).to_have_attribute("aria-haspopup", "dialog")
    await chat.send("hello")
    await chat.wait_reply(f"[{READY.removeprefix('Ready with ')}] hello")

    dialog = await open_panel(chat)
    model = dialog.get_by_label("Model")
    stream = dialog.get_by_role("switch", name="Stream the reply")
    temperature = dialog.get_by_label("Temperature")
    persona = dialog.get_by_label("Persona")
    max_words = dialog.get_by_label("Max words")
    topics = dialog.get_by_label("Topics", exact=True)
    await expect(model).to_be_focused()  # the first control
    await expect(model).to_have_value("small")
    await expect(model).to_have_attribute("title", "Which model answers")
    await expect(model).to_have_accessible_description("Which model answers")
    await expect(stream).to_be_checked()
    await expect(temperature).to_have_value("0.5")
    await expect(dialog.locator("output")).to_have_text("0.5")
    await expect(persona).to_have_value("helpful")
    await expect(persona).to_have_attribute("placeholder", "Who answers")
    await expect(max_words).to_have_value("100")
    assert await tags_shown(dialog) == ["news"]
    days = dialog.get_by_role("group", name="Days")
    await expect(days).to_have_accessible_description(re.compile("When to write"))
    await expect(days.get_by_role("checkbox", name="Monday")).to_be_checked()
    await expect(days.get_by_role("checkbox", name="Tuesday")).not_to_be_checked()
    await chat.shot("50-settings-panel")

    await model.select_option("large")
    await stream.press("Space")
    await expect(stream).not_to_be_checked()
    await temperature.focus()
    for _ in range(3):
        await temperature.press("ArrowRight")
    await expect(temperature).to_have_value("0.8")
    await expect(dialog.locator("output")).to_have_text("0.8")  # the value is shown as it moves
    await persona.fill("terse pirate")
    await max_words.fill("5000")
    await dialog.get_by_role("button", name="Remove news").click()
    await topics.fill("sport")
    await topics.press("Enter")  # adds the tag; does not confirm the dialog
    await topics.fill("weather")
    await dialog.get_by_role("button", name="Add", exact=True).click()
    assert await tags_shown(dialog) == ["sport", "weather"]
    await expect(dialog).to_be_visible()
    await days.get_by_role("checkbox", name="Tuesday").check()

    # The server refuses 5000 (the input's max is 1000): said next to the control, nothing kept.
    await dialog.get_by_role("button", name="Confirm").click()
    error = dialog.locator(".settings-field-numberinput .settings-error")
    await expect(error).to_have_text(re.compile(r"Max words \(max_words\) must be at most 1000"))
    await expect(max_words).to_have_attribute("aria-invalid", "true")
    await expect(max_words).to_be_focused()
    await expect(max_words).to_have_accessible_description(re.compile("must be at most 1000"))
    await chat.shot("51-settings-error")
    assert (await saved_settings(user))["model"] == "small"

    await max_words.fill("20")
    await dialog.get_by_role("button", name="Confirm").click()
    await expect(dialog).to_be_hidden()
    await expect(button).to_be_focused()
    await chat.send("next")
    await chat.wait_reply(f"[{CHANGED}] next")
    assert await saved_settings(user) == {
        "model": "large",
        "stream": False,
        "temperature": 0.8,
        "persona": "terse pirate",
        "max_words": 20,
        "topics": ["sport", "weather"],
        "days": ["mon", "tue"],
    }

    # A reload: the panel comes back with the saved values.
    await chat.reload()
    dialog = await open_panel(chat)
    await expect(dialog.get_by_label("Model")).to_have_value("large")
    await expect(dialog.get_by_role("switch", name="Stream the reply")).not_to_be_checked()
    await expect(dialog.get_by_label("Temperature")).to_have_value("0.8")
    await expect(dialog.get_by_label("Persona")).to_have_value("terse pirate")
    await expect(dialog.get_by_label("Max words")).to_have_value("20")
    assert await tags_shown(dialog) == ["sport", "weather"]
    await expect(dialog.get_by_role("checkbox", name="Tuesday")).to_be_checked()
    await chat.shot("52-settings-after-reload")

    # Cancel (and Escape) forget what was changed in the dialog.
    await dialog.get_by_label("Persona").fill("forgotten")
    await dialog.get_by_role("button", name="Cancel").click()
    await expect(dialog).to_be_hidden()
    dialog = await open_panel(chat)
    await expect(dialog.get_by_label("Persona")).to_have_value("terse pirate")
    await dialog.get_by_label("Persona").fill("also forgotten")
    await chat.page.keyboard.press("Escape")
    await expect(dialog).to_be_hidden()
    await chat.send("after cancel")
    await chat.wait_reply(f"[{CHANGED}] after cancel")
    await chat.assert_clean()


async def test_dark_theme_panel_and_no_button_without_declared_settings(
    open_chat: Any, make_user: Any, browser: Browser, server: Any
) -> None:
    """The panel in the dark theme (a screenshot); an app that declares no settings shows no
    settings button (the lifecycle test app)."""
    chat = await open_chat()
    await chat.page.emulate_media(color_scheme="dark")
    await chat.sign_in(make_user())
    await chat.wait_reply(READY)
    await open_panel(chat)
    await chat.shot("53-settings-panel-dark")

    async for open_plain in _page_opener(browser, server.url):
        plain = await open_plain()
        await plain.sign_in(make_user())
        await plain.page.wait_for_timeout(500)
        await expect(plain.page.locator("#settings-button")).to_be_hidden()
