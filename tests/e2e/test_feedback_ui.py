"""Feedback in the web UI, end to end: Playwright drives Debian's Chromium against a live daphne
running an engine-runtime app (``tests.apps.web_app``) and a hooks-API app
(``examples.notes_app``). A user gives a reply thumbs down with a comment, reloads and finds it
restored, changes it to thumbs up, takes it back; the database agrees at every step, the page
asks nothing of another origin, and the buttons say what they are (labels, ``aria-pressed``).

Screenshots go to ``test-artifacts/screenshots/`` like those of ``test_web_ui.py``, whose page
helpers (``Chat``, the probes) this reuses.
"""

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from playwright.async_api import Browser, expect

from tests.e2e.test_web_ui import (
    Chat,
    _page_opener,
)
from tests.support.waiting import wait_until_async
from threads_app.models import Feedback

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Each app kind, the message the test sends, and the reply it waits for.
APPS = {
    "engine": ("tests.apps.web_app", "rate this one", "Echo #1: rate this one"),
    "hooks": ("examples.notes_app", "buy milk", "Noted. That makes 1 note."),
}
COMMENT = "It repeated me instead of answering."


@pytest.fixture(scope="module", params=sorted(APPS))
def app_server(request, server_factory, tmp_path_factory) -> tuple[str, Any]:
    kind = request.param
    chat_app = APPS[kind][0]
    env = {"CHAT_APP": chat_app}
    if kind == "engine":
        env["ECHO_STATE_DIR"] = str(tmp_path_factory.mktemp("feedback-echo"))
    return kind, server_factory.start(**env)


@pytest.fixture
async def open_chat(browser: Browser, app_server) -> AsyncIterator[Callable[[], Awaitable[Chat]]]:
    _, server = app_server
    async for open_page in _page_opener(browser, server.url):
        yield open_page


@sync_to_async
def stored(user: Any) -> list[tuple[int, str]]:
    return list(Feedback.objects.filter(user=user).values_list("value", "comment"))


async def _none_stored(user: Any) -> bool:
    return await stored(user) == []


async def test_thumbs_down_with_a_comment_survives_a_reload_and_can_be_changed_and_taken_back(
    app_server, open_chat, make_user
):
    kind, _server = app_server
    _, message, answer = APPS[kind]
    user = make_user()
    chat = await open_chat()
    await chat.sign_in(user)
    await chat.send(message)
    await chat.wait_reply(answer)

    bar = chat.reply(answer).locator(".feedback")
    up, down = bar.locator(".feedback-up"), bar.locator(".feedback-down")
    await expect(bar).to_have_attribute("role", "group")
    await expect(up).to_have_attribute("aria-label", "Good reply")
    await expect(down).to_have_attribute("aria-label", "Bad reply")
    await expect(up).to_have_attribute("aria-pressed", "false")
    await expect(down).to_have_attribute("aria-pressed", "false")
    await expect(down).to_be_enabled()
    # The user's own message takes no feedback.
    await expect(chat.locator("#transcript > .msg-user .feedback")).to_have_count(0)

    # Thumbs down opens the comment dialog; Submit gives it.
    await down.click()
    dialog = chat.locator("#feedback-dialog")
    await expect(dialog).to_be_visible()
    await expect(chat.locator("#feedback-dialog-title")).to_have_text("Thumbs down: anything to add?")
    await expect(chat.locator("#feedback-comment")).to_be_focused()
    await chat.page.fill("#feedback-comment", COMMENT)
    await chat.shot(f"30-feedback-dialog-{kind}")
    await chat.locator("#feedback-submit").click()
    await expect(dialog).to_be_hidden()
    await expect(down).to_have_attribute("aria-pressed", "true")
    await expect(up).to_have_attribute("aria-pressed", "false")
    await expect(bar.locator(".feedback-comment")).to_have_text(f"“{COMMENT}”")
    assert await stored(user) == [(0, COMMENT)]

    # A reload reads it back (bootstrap and resume_thread both carry it).
    await chat.reload()
    bar = chat.reply(answer).locator(".feedback")
    up, down = bar.locator(".feedback-up"), bar.locator(".feedback-down")
    await expect(down).to_have_attribute("aria-pressed", "true")
    await expect(up).to_have_attribute("aria-pressed", "false")
    await expect(bar.locator(".feedback-comment")).to_have_text(f"“{COMMENT}”")
    await expect(chat.locator("#transcript .feedback[data-value='0']")).to_have_count(1)
    await chat.shot(f"31-feedback-restored-{kind}")

    # Changed to thumbs up, without a comment; Cancel in between changes nothing.
    await up.click()
    await expect(dialog).to_be_visible()
    await chat.locator("#feedback-dialog [data-cancel]").click()
    await expect(dialog).to_be_hidden()
    await expect(down).to_have_attribute("aria-pressed", "true")
    await up.click()
    await expect(chat.locator("#feedback-comment")).to_have_value("")
    await chat.locator("#feedback-submit").click()
    await expect(up).to_have_attribute("aria-pressed", "true")
    await expect(down).to_have_attribute("aria-pressed", "false")
    await expect(bar.locator(".feedback-comment")).to_be_hidden()
    assert await stored(user) == [(1, "")]

    # Pressing the pressed thumb takes it back, also after a reload.
    await up.click()
    await expect(up).to_have_attribute("aria-pressed", "false")
    await wait_until_async(lambda: _none_stored(user))
    await chat.reload()
    await expect(chat.reply(answer).locator(".feedback [aria-pressed='true']")).to_have_count(0)
    await expect(chat.reply(answer).locator(".feedback-up")).to_have_attribute("aria-pressed", "false")

    await chat.assert_clean()  # other origins too


async def test_escape_closes_the_feedback_dialog_without_giving_anything(app_server, open_chat, make_user):
    kind, _ = app_server
    _, message, answer = APPS[kind]
    user = make_user()
    chat = await open_chat()
    await chat.sign_in(user)
    await chat.send(message)
    await chat.wait_reply(answer)
    await chat.reply(answer).locator(".feedback-up").click()
    await expect(chat.locator("#feedback-dialog")).to_be_visible()
    await chat.page.keyboard.press("Escape")
    await expect(chat.locator("#feedback-dialog")).to_be_hidden()
    await expect(chat.reply(answer).locator(".feedback-up")).to_be_focused()
    assert await stored(user) == []
    assert await chat.sent_events("stop") == []
    await chat.assert_clean()
