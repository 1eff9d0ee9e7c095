"""Starters and chat profiles in the web UI (Playwright, Debian's Chromium), with the page
helpers of ``test_web_ui``: a hooks-API app with two profiles that answer differently
(``examples.profiles_app``), and the engine runtime with starters from ``CHAT_STARTERS``.
Screenshots go where ``test_web_ui``'s do."""

import json
import re
from typing import Any

import pytest
from playwright.async_api import Browser, expect

from tests.e2e.test_web_ui import THREAD_URL, Chat, _page_opener

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ECHO_GREETING = "Hi! This chat uses the Echo profile."
REVERSE_GREETING = "Hi! This chat uses the Reverse profile."
ENGINE_STARTERS = [
    {"label": "Say hi", "message": "Hello from a starter"},
    {"label": "Explain", "message": "Explain what Tether does"},
]


@pytest.fixture(scope="module")
def profiles_server(server_factory: Any) -> Any:
    return server_factory.start(CHAT_APP="examples.profiles_app")


@pytest.fixture(scope="module")
def engine_starters_server(server_factory: Any, tmp_path_factory: Any) -> Any:
    return server_factory.start(
        CHAT_APP="sessions_app.default_app",
        ECHO_STATE_DIR=str(tmp_path_factory.mktemp("starters-echo")),
        CHAT_STARTERS=json.dumps(ENGINE_STARTERS),
    )


@pytest.fixture
async def open_profiles_chat(browser: Browser, profiles_server: Any):  # the fixture
    async for open_page in _page_opener(browser, profiles_server.url):
        yield open_page


@pytest.fixture
async def open_engine_chat(browser: Browser, engine_starters_server: Any):  # the fixture
    async for open_page in _page_opener(browser, engine_starters_server.url):
        yield open_page


def starter(chat: Chat, label: str) -> Any:
    return chat.page.locator("#starters").get_by_role("button", name=label, exact=True)


async def starter_labels(chat: Chat) -> list[str]:
    labels: list[str] = await chat.page.eval_on_selector_all(
        "#starters:not([hidden]) .starter-label", "nodes => nodes.map(node => node.textContent)"
    )
    return labels


async def connect_profiles(chat: Chat) -> list[str]:
    """The chatProfile of every namespace CONNECT the page sent (its socket auth)."""
    profiles = []
    for frame in await chat.page.evaluate("window.__sent"):
        if frame.startswith("40"):
            auth = json.loads(frame[2:] or "{}")
            profiles.append(auth.get("chatProfile", ""))
    return profiles


def profile_button(chat: Chat) -> Any:
    """The picker's button: named by the bar's label and the profile it shows."""
    return chat.page.get_by_role("button", name=re.compile(r"^Profile "))


def profile_list(chat: Chat) -> Any:
    return chat.page.get_by_role("listbox", name="Profile")


async def option_labels(chat: Chat) -> list[str]:
    """The options' names, in order, and which one is chosen (``*``)."""
    labels: list[str] = await chat.page.eval_on_selector_all(
        "#chat-profile-menu [role=option]",
        "nodes => nodes.map(node => node.querySelector('.profile-option-label').textContent"
        " + (node.getAttribute('aria-selected') === 'true' ? '*' : ''))",
    )
    return labels


async def test_pick_a_profile_click_a_starter_get_its_answer_and_keep_the_profile_after_a_reload(
    open_profiles_chat: Any, make_user: Any
) -> None:
    chat = await open_profiles_chat()
    await chat.sign_in(make_user())
    page = chat.page
    picker = profile_button(chat)

    # Before the first message: the picker (default preselected, with its description) and
    # the app's starters, below the greeting of the default profile.
    await expect(chat.locator(".msg-assistant .msg-body")).to_have_text(ECHO_GREETING)
    await expect(picker).to_be_visible()
    await expect(picker).to_have_accessible_name("Profile Echo")
    await expect(picker).to_have_attribute("aria-expanded", "false")
    await expect(chat.locator("#chat-profile-description")).to_have_text("Repeats what you say.")
    assert await option_labels(chat) == ["Echo*", "Reverse"]
    await expect(starter(chat, "Say hello")).to_be_visible()
    assert await starter_labels(chat) == ["Say hello", "Ask the time"]

    # Keyboard: the picker takes the focus; choosing another profile starts the chat again
    # with it (a new session: the greeting of the new profile only) and its own starters.
    await picker.focus()
    await expect(picker).to_be_focused()
    await page.keyboard.press("ArrowDown")
    await expect(profile_list(chat)).to_be_visible()
    await expect(picker).to_have_attribute("aria-expanded", "true")
    await expect(profile_list(chat).get_by_role("option", name="Echo")).to_be_focused()
    await page.keyboard.press("ArrowDown")
    await expect(profile_list(chat).get_by_role("option", name="Reverse")).to_be_focused()
    await page.keyboard.press("Enter")
    await expect(profile_list(chat)).to_be_hidden()
    await expect(picker).to_be_focused()
    await expect(chat.locator("#transcript .msg-body")).to_have_text([REVERSE_GREETING])
    await expect(picker).to_have_accessible_name("Profile Reverse")
    assert await option_labels(chat) == ["Echo", "Reverse*"]
    await expect(starter(chat, "Reverse a word")).to_be_visible()
    assert await starter_labels(chat) == ["Reverse a word", "Reverse a palindrome"]
    await expect(chat.locator("#chat-profile-description strong")).to_have_text("backwards")
    assert (await connect_profiles(chat))[-1] == "Reverse"
    await chat.shot("30-profile-picker-and-starters")

    # A starter sends its message; the answer is the profile's; the profile is now fixed.
    await starter(chat, "Reverse a word").click()
    await chat.wait_reply("Reverse: desserts")
    await expect(page).to_have_url(THREAD_URL)
    await expect(picker).to_be_hidden()
    await expect(chat.locator("#chat-profile-current")).to_have_text("Reverse")
    await expect(chat.locator("#starters")).to_be_hidden()
    expected = [["assistant", REVERSE_GREETING], ["user", "stressed"], ["assistant", "Reverse: desserts"]]
    assert await chat.transcript() == expected
    await chat.assert_clean()

    # After a reload the thread shows its profile, read-only, and answers with it.
    await chat.reload()
    await expect(chat.messages).to_have_count(len(expected))
    assert await chat.transcript() == expected
    await expect(chat.locator("#chat-profile-current")).to_have_text("Reverse")
    await expect(picker).to_be_hidden()
    await expect(chat.locator("#starters")).to_be_hidden()
    await chat.send("drawer")
    await chat.wait_reply("Reverse: reward")
    await chat.shot("31-profile-kept-after-reload")
    await chat.assert_clean()

    # A new chat starts with the profile last chosen.
    await chat.new_chat()
    await expect(chat.locator(".msg-assistant .msg-body")).to_have_text(REVERSE_GREETING)
    await expect(picker).to_have_accessible_name("Profile Reverse")
    await chat.assert_clean()


async def test_the_profile_menu_by_click_and_keyboard_reaches_the_server_and_closes_without_choosing(
    open_profiles_chat: Any, make_user: Any
) -> None:
    """The styled menu does what the native select did: each choice is a new session whose
    CONNECT carries the profile and whose ``on_chat_start`` greets with it; Esc, Tab and a
    click elsewhere close the list, choose nothing and leave the focus where it was."""
    chat = await open_profiles_chat()
    await chat.sign_in(make_user())
    page = chat.page
    picker = profile_button(chat)
    listbox = profile_list(chat)
    await expect(chat.locator(".msg-assistant .msg-body")).to_have_text(ECHO_GREETING)
    connects = len(await connect_profiles(chat))

    # By click: the list opens under the button, each profile with its description and icon.
    await picker.click()
    await expect(listbox).to_be_visible()
    reverse = listbox.get_by_role("option", name="Reverse")
    await expect(reverse).to_have_accessible_name("Reverse Says it backwards.")
    await expect(reverse.locator("img.profile-icon")).to_have_attribute("src", "/static/tether/favicon.svg")
    await chat.shot("33-profile-menu-open")
    await reverse.click()
    await expect(listbox).to_be_hidden()
    await expect(picker).to_be_focused()
    await expect(chat.locator("#transcript .msg-body")).to_have_text([REVERSE_GREETING])
    assert (await connect_profiles(chat))[connects:] == ["Reverse"]
    # The button shows the chosen profile's icon, loaded from this server.
    icon = picker.locator("img.profile-icon")
    await expect(icon).to_be_visible()
    assert await icon.evaluate("image => image.complete && image.naturalWidth > 0")

    # Closing without choosing: Esc (the focus back on the button), Tab, a click elsewhere.
    await page.keyboard.press("Enter")
    await expect(listbox.get_by_role("option", name="Reverse")).to_be_focused()
    await page.keyboard.press("ArrowUp")
    await expect(listbox.get_by_role("option", name="Echo")).to_be_focused()
    await page.keyboard.press("Escape")
    await expect(listbox).to_be_hidden()
    await expect(picker).to_be_focused()
    await expect(picker).to_have_attribute("aria-expanded", "false")
    await page.keyboard.press("ArrowUp")
    await expect(listbox).to_be_visible()
    await page.keyboard.press("Tab")
    await expect(listbox).to_be_hidden()
    await expect(picker).to_be_focused()
    await picker.click()
    await expect(listbox).to_be_visible()
    await chat.locator("#message-input").click()
    await expect(listbox).to_be_hidden()
    assert (await connect_profiles(chat))[connects:] == ["Reverse"]
    await expect(picker).to_have_accessible_name("Profile Reverse")

    # By keyboard, back to the default: Home, then Space chooses; the server greets with it.
    await picker.focus()
    await page.keyboard.press("Space")
    await expect(listbox.get_by_role("option", name="Reverse")).to_be_focused()
    await page.keyboard.press("Home")
    await page.keyboard.press("Space")
    await expect(picker).to_be_focused()
    await expect(chat.locator("#transcript .msg-body")).to_have_text([ECHO_GREETING])
    assert (await connect_profiles(chat))[connects:] == ["Reverse", "Echo"]
    await chat.send("hello")
    await chat.wait_reply("Echo: hello")
    await expect(chat.locator("#chat-profile-current")).to_have_text("Echo")
    await chat.assert_clean()


async def test_the_engine_runtime_shows_the_starters_of_its_setting(
    open_engine_chat: Any, make_user: Any
) -> None:
    chat = await open_engine_chat()
    await chat.sign_in(make_user())
    await expect(starter(chat, "Say hi")).to_be_visible()
    assert await starter_labels(chat) == ["Say hi", "Explain"]
    await expect(chat.locator("#profile-bar")).to_be_hidden()  # no profiles: no picker
    await chat.shot("32-engine-runtime-starters")

    await starter(chat, "Say hi").click()
    await chat.wait_reply("Echo #1: Hello from a starter")
    await expect(chat.locator("#starters")).to_be_hidden()
    assert await chat.transcript() == [
        ["user", "Hello from a starter"],
        ["assistant", "Echo #1: Hello from a starter"],
    ]
    await expect(chat.page).to_have_url(THREAD_URL)
    await expect(chat.locator("#thread-title")).to_have_text(re.compile("Hello from a starter"))
    await chat.assert_clean()
