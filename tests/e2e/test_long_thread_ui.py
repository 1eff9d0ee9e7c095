"""The web page opens a long thread with its newest steps only (the paged resume, and
bootstrap with a limit) and reads older ones as the user scrolls up: every step once, in
order, for an engine-runtime app and a hooks-API app."""

import json
import re
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from asgiref.sync import sync_to_async
from playwright.async_api import expect

from tests.e2e.test_web_ui import _page_opener, web_server  # noqa: F401  (a fixture)
from threads_app.models import Step, Thread
from threads_app.services import default_box_for

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

STEPS = 230  # five pages of the page's 50, the last one short
PAGE_STEPS = 50


@pytest.fixture(scope="module")
def lifecycle_server(server_factory):
    """A hooks-API app with ``on_chat_resume`` ("welcome back")."""
    return server_factory.start(CHAT_APP="tests.apps.lifecycle_app")


@pytest.fixture(params=["engine", "hooks"])
async def open_page(request, browser):
    server = request.getfixturevalue("web_server" if request.param == "engine" else "lifecycle_server")
    async for opener in _page_opener(browser, server.url):
        yield opener


@sync_to_async
def long_thread(user) -> Thread:
    """A thread of STEPS messages, written straight to the database."""
    thread = Thread.objects.create(owner=user, box=default_box_for(user), name="a long chat", last_seq=STEPS)
    start = datetime.now(UTC) - timedelta(hours=1)
    Step.objects.bulk_create(
        Step(
            id=uuid.uuid4(),
            thread=thread,
            seq=i + 1,
            type="user_message" if i % 2 == 0 else "assistant_message",
            name="you" if i % 2 == 0 else "assistant",
            output=f"line {i}",
            created_at=start + timedelta(seconds=i),
            start=start + timedelta(seconds=i),
            end=start + timedelta(seconds=i),
        )
        for i in range(STEPS)
    )
    return thread


async def shown_lines(chat) -> list[str]:
    texts = await chat.page.eval_on_selector_all(
        "#transcript > .msg .msg-body", "nodes => nodes.map(n => n.innerText.trim())"
    )
    return [t for t in texts if t.startswith("line ")]


async def test_a_long_thread_opens_with_its_last_page_and_scrolling_up_reads_the_rest(open_page, make_user):
    user = make_user()
    thread = await long_thread(user)
    chat = await open_page()
    await chat.sign_in(user)
    await chat.open_thread(thread.pk)

    # The newest page only, and the way to older ones.
    await expect(chat.locator("#transcript > .msg").filter(has_text="line 229")).to_have_count(1)
    await expect(chat.locator("body")).to_have_attribute("data-older-steps", "some")
    await expect(chat.locator("button.load-older")).to_be_visible()
    assert await shown_lines(chat) == [f"line {i}" for i in range(STEPS - PAGE_STEPS, STEPS)]
    connects = [f for f in await chat.page.evaluate("window.__sent") if f.startswith("40")]
    assert json.loads(connects[0][2:])["resumeSteps"] == PAGE_STEPS

    # Scrolling up reads page after page until the start of the thread.
    for _ in range(STEPS // PAGE_STEPS + 2):
        if await chat.page.evaluate("document.body.dataset.olderSteps") == "none":
            break
        count = len(await shown_lines(chat))
        await chat.page.evaluate("document.querySelector('#messages').scrollTop = 0")
        await expect(
            chat.locator("#transcript > .msg .msg-body", has_text=re.compile(r"^line "))
        ).not_to_have_count(count)
    await expect(chat.locator("body")).to_have_attribute("data-older-steps", "none")
    await expect(chat.locator("button.load-older")).to_be_hidden()
    assert await shown_lines(chat) == [f"line {i}" for i in range(STEPS)]  # each once, in order
    await chat.assert_clean()
