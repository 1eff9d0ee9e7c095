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


async def test_pick_a_profile_click_a_starter_get_its_answer_and_keep_the_profile_after_a_reload(
    open_profiles_chat: Any, make_user: Any
) -> None:
    chat = await open_profiles_chat()
    await chat.sign_in(make_user())
    page = chat.page
    picker = page.get_by_role("combobox", name="Profile")

    # Before the first message: the picker (default preselected, with its description) and
    # the app's starters, below the greeting of the default profile.
    await expect(chat.locator(".msg-assistant .msg-body")).to_have_text(ECHO_GREETING)
    await expect(picker).to_be_visible()
    await expect(picker).to_have_value("Echo")
    await expect(chat.locator("#chat-profile-description")).to_have_text("Repeats what you say.")
    assert await picker.locator("option").all_inner_texts() == ["Echo", "Reverse"]
    await expect(starter(chat, "Say hello")).to_be_visible()
    assert await starter_labels(chat) == ["Say hello", "Ask the time"]

    # Keyboard: the picker takes the focus; choosing another profile starts the chat again
    # with it (a new session: the greeting of the new profile only) and its own starters.
    await picker.focus()
    await expect(picker).to_be_focused()
    await picker.select_option("Reverse")
    await expect(chat.locator("#transcript .msg-body")).to_have_text([REVERSE_GREETING])
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
    await expect(picker).to_have_value("Reverse")
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
