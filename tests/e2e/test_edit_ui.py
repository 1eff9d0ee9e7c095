"""Editing a sent message on the chat page, in Chromium: the inline editor (keyboard and
screen-reader names, Esc cancels, Enter saves), the conversation from that message on replaced
by the new answer, another tab and a reload showing the edited state; desktop and phone, light
and dark, each screen photographed and checked by axe-core (``test_page_screens.Screens``).
An engine-runtime app edits as well where its engine can forget what followed the message."""

import asyncio
import re
from typing import Any

import pytest
from playwright.async_api import Browser, ViewportSize, expect

from tests.e2e.test_page_screens import SHOTS, Screens
from tests.e2e.test_web_ui import DESKTOP, PAGE_PROBES, PHONE, TIMEOUT_MS, Chat
from threads_app.models import Box

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def showcase_server(server_factory: Any) -> Any:
    """A hooks-API app whose answer to plain text is "You said: <text>"."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    return server_factory.start(CHAT_APP="examples.showcase_app")


@pytest.fixture(scope="module")
def engine_app_server(server_factory: Any, tmp_path_factory: Any) -> Any:
    """The web tests' engine-runtime app (echo engine)."""
    return server_factory.start(
        CHAT_APP="tests.apps.web_app", ECHO_STATE_DIR=str(tmp_path_factory.mktemp("echo"))
    )


async def conversation(chat: Chat) -> list[list[str]]:
    """[role, text] of the user's messages and the replies to them (the greeting left out)."""
    shown = await chat.transcript()
    return [entry for entry in shown if entry[0] == "user" or entry[1].startswith("You said:")]


async def shows(chat: Chat, expected: list[list[str]]) -> None:
    """Wait until the tab's conversation is ``expected``; fail with what it shows."""
    for _ in range(100):
        if (shown := await conversation(chat)) == expected:
            return
        await asyncio.sleep(0.1)
    assert shown == expected, await chat.transcript()


@pytest.mark.parametrize("device", ["desktop", "phone"])
async def test_editing_a_sent_message_replaces_what_followed_it_everywhere(
    browser: Browser, showcase_server: Any, make_user: Any, device: str
) -> None:
    viewport: ViewportSize = DESKTOP if device == "desktop" else PHONE
    context = await browser.new_context(viewport=viewport)
    context.set_default_timeout(TIMEOUT_MS)
    await context.add_init_script(PAGE_PROBES)
    try:
        chat = Chat(await context.new_page(), showcase_server.url)
        screens = Screens(chat, device)
        await chat.sign_in(make_user())
        await chat.send("first")
        await chat.wait_reply("You said: first")
        await chat.send("second")
        await chat.wait_reply("You said: second")
        await expect(chat.page).to_have_url(re.compile(r"/thread/[0-9a-f-]+/$"))
        thread_url = chat.page.url
        other = Chat(await context.new_page(), showcase_server.url)
        await other.page.goto(thread_url)
        await other.wait_connected()
        await other.wait_reply("You said: second")

        edit_buttons = chat.page.get_by_role("button", name="Edit message")
        await expect(edit_buttons).to_have_count(2)
        first = chat.locator("#transcript > .msg-user").first
        # Esc cancels: the message is as it was, the focus back on its Edit button.
        await first.get_by_role("button", name="Edit message").click()
        editor = chat.page.get_by_role("textbox", name="Edit your message")
        await expect(editor).to_be_focused()
        await expect(editor).to_have_value("first")
        await editor.fill("first, but not saved")
        await chat.page.keyboard.press("Escape")
        await expect(editor).to_have_count(0)
        await expect(first.locator(".msg-body")).to_have_text("first")
        await expect(first.get_by_role("button", name="Edit message")).to_be_focused()

        await first.get_by_role("button", name="Edit message").click()
        await editor.fill("first, edited")
        await expect(chat.page.get_by_role("button", name="Save")).to_be_visible()
        await expect(chat.page.get_by_role("button", name="Cancel")).to_be_visible()
        await screens.check("edit")
        await editor.press("Enter")
        await chat.wait_reply("You said: first, edited")
        await expect(chat.locator("#message-input")).to_be_focused()  # Edit is disabled mid-reply
        expected = [["user", "first, edited"], ["assistant", "You said: first, edited"]]
        await shows(chat, expected)
        await screens.check("edited")

        # The other tab, live: what followed the message is gone, the message rewritten, the
        # new answer shown once; a reload (of either tab) reads the same from the transcript.
        await expect(other.reply("You said: second")).to_have_count(0)
        await expect(other.locator("#transcript > .msg-user .msg-body")).to_have_text(["first, edited"])
        await shows(other, expected)
        await other.reload()
        await shows(other, expected)
        await chat.reload()
        await shows(chat, expected)
        await expect(chat.page.get_by_role("button", name="Edit message")).to_have_count(1)
        for tab in (chat, other):
            assert tab.errors == [], tab.errors
            assert tab.elsewhere == [], tab.elsewhere
        assert screens.problems == [], "\n".join(screens.problems)
    finally:
        await context.close()


async def test_an_edit_in_french(browser: Browser, showcase_server: Any, make_user: Any) -> None:
    context = await browser.new_context(viewport=DESKTOP, locale="fr-FR")
    context.set_default_timeout(TIMEOUT_MS)
    try:
        chat = Chat(await context.new_page(), showcase_server.url)
        await chat.sign_in(make_user())
        await chat.send("bonjour")
        await chat.wait_reply("You said: bonjour")
        await chat.page.get_by_role("button", name="Modifier le message").click()
        await expect(chat.page.get_by_role("textbox", name="Modifier votre message")).to_be_focused()
        await expect(chat.page.get_by_role("button", name="Enregistrer")).to_be_visible()
        await chat.page.get_by_role("button", name="Annuler").click()
        await expect(chat.page.get_by_role("button", name="Modifier le message")).to_be_focused()
    finally:
        await context.close()


async def test_an_engine_chat_edits_a_message_and_offers_no_edit_where_its_engine_cannot_forget(
    browser: Browser, engine_app_server: Any, make_user: Any
) -> None:
    """The echo engine forgets what followed the edited message (it counts from 1 again); a
    box whose engine cannot forget (Claude Code) offers no "Edit"."""
    context = await browser.new_context(viewport=DESKTOP)
    context.set_default_timeout(TIMEOUT_MS)
    try:
        chat = Chat(await context.new_page(), engine_app_server.url)
        user = make_user()
        await chat.sign_in(user)
        await chat.send("hello")
        await chat.wait_reply("Echo #1: hello")
        await chat.send("world")
        await chat.wait_reply("Echo #2: world")
        first = chat.locator("#transcript > .msg-user").first
        await first.get_by_role("button", name="Edit message").click()
        editor = chat.page.get_by_role("textbox", name="Edit your message")
        await editor.fill("hi")
        await editor.press("Enter")
        await chat.wait_reply("Echo #1: hi")
        expected = [["user", "hi"], ["assistant", "Echo #1: hi"]]

        async def echoed() -> list[list[str]]:
            return [e for e in await chat.transcript() if e[0] == "user" or e[1].startswith("Echo")]

        async def shows_the_edit() -> None:
            for _ in range(100):
                if await echoed() == expected:
                    break
                await asyncio.sleep(0.1)
            assert await echoed() == expected, await chat.transcript()

        await shows_the_edit()
        await chat.reload()  # connected, and the history drawn once it arrives
        await shows_the_edit()
        await expect(chat.page.get_by_role("button", name="Edit message")).to_have_count(1)
        await Box.objects.filter(owner=user).aupdate(engine=Box.Engine.CLAUDE)
        await chat.reload()
        await expect(chat.locator("#transcript > .msg-user")).to_have_count(1)
        await expect(chat.page.get_by_role("button", name="Edit message")).to_have_count(0)
        assert chat.errors == [], chat.errors
    finally:
        await context.close()
