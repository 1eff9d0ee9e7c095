"""Steps in the web UI, end to end: Playwright drives Debian's Chromium against a live daphne
running ``tests.apps.steps_app`` (a tool step with a streamed retrieval step nested inside,
then a failing step, then the reply) and the engine runtime (``tests.apps.web_app``, whose
echo engine calls a tool on ``!tool``). Steps show running, then collapsed with their name,
type and duration; opened they show input, output and the nested step; the failing one says
so; a reload shows the same. Screenshots go to ``test-artifacts/screenshots/``."""

import re
from collections.abc import AsyncIterator

import pytest
from playwright.async_api import Browser, expect

from tests.apps.web_app import GREETING
from tests.e2e.test_web_ui import DESKTOP, PAGE_PROBES, TIMEOUT_MS, Chat

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DURATION = re.compile(r"^\d+(\.\d)? (ms|s)$")


@pytest.fixture(scope="module")
def steps_server(server_factory):
    return server_factory.start(CHAT_APP="tests.apps.steps_app", STEPS_APP_PAUSE="0.5")


@pytest.fixture(scope="module")
def engine_server(server_factory, tmp_path_factory):
    return server_factory.start(
        CHAT_APP="tests.apps.web_app", ECHO_STATE_DIR=str(tmp_path_factory.mktemp("steps-echo"))
    )


@pytest.fixture
async def page_context(browser: Browser) -> AsyncIterator[object]:
    context = await browser.new_context(viewport=DESKTOP)
    context.set_default_timeout(TIMEOUT_MS)
    await context.add_init_script(PAGE_PROBES)
    yield context
    await context.close()


def top_step(chat: Chat, name: str):
    """The step ``name`` shown in the transcript itself (not nested)."""
    return chat.locator("#transcript > li.msg-step").filter(
        has=chat.page.locator(":scope > details > summary .step-label", has_text=name)
    )


def own(step, part: str):
    """A part of ``step`` itself, not of the steps nested in it: ``summary``, ``.step-label``,
    ``.step-input``..."""
    if part == "summary":
        return step.locator(":scope > details > summary")
    if part.startswith(".step-input") or part.startswith(".step-output"):
        return step.locator(f":scope > details > .step-body {part}")
    return step.locator(f":scope > details > summary {part}")


async def check_collapsed_steps(chat: Chat) -> None:
    search, calculator = top_step(chat, "search"), top_step(chat, "calculator")
    # In transcript order: the question, its two steps, the reply.
    kinds = await chat.locator("#transcript > li").evaluate_all("items => items.map(i => i.className)")
    assert kinds == ["msg msg-user", "msg msg-step", "msg msg-step", "msg msg-assistant"]
    await expect(search).to_have_attribute("data-state", "done")
    await expect(own(search, ".step-label")).to_have_text("Used search")
    await expect(own(search, ".step-type")).to_have_text("tool")
    await expect(own(search, ".step-duration")).to_have_text(DURATION)
    assert await search.locator(":scope > details").get_attribute("open") is None
    await expect(own(search, ".step-input")).to_be_hidden()
    await expect(calculator).to_have_attribute("data-state", "error")
    await expect(own(calculator, ".step-label")).to_have_text("calculator failed")


async def open_and_check(chat: Chat) -> None:
    search = top_step(chat, "search")
    await own(search, "summary").click()
    await expect(own(search, ".step-input")).to_contain_text('"query": "rain"')
    await expect(own(search, ".step-output")).to_contain_text('"hits": 3')
    fetch = search.locator(".step-children > li.msg-step")
    await expect(fetch).to_have_count(1)
    await expect(own(fetch, ".step-label")).to_have_text("Used fetch")
    await expect(own(fetch, ".step-type")).to_have_text("retrieval")
    await own(fetch, "summary").focus()
    await chat.page.keyboard.press("Enter")  # keyboard opens it too
    await expect(own(fetch, ".step-output")).to_contain_text("first second third")
    await expect(own(fetch, ".step-input")).to_contain_text("example.invalid")
    calculator = top_step(chat, "calculator")
    await own(calculator, "summary").click()
    await expect(own(calculator, ".step-output")).to_contain_text("ZeroDivisionError: division by zero")
    await expect(own(calculator, ".step-input")).to_contain_text('"b": 0')


async def test_steps_run_then_collapse_open_with_input_output_and_nesting_and_survive_a_reload(
    steps_server, page_context, make_user
):
    chat = Chat(await page_context.new_page(), steps_server.url)
    await chat.sign_in(make_user())
    await chat.send("rain")

    # While the nested step streams, both it and its parent run, and the tokens show live.
    search = top_step(chat, "search")
    await expect(search).to_have_attribute("data-state", "running")
    await expect(own(search, ".step-label")).to_have_text("Using search")
    await expect(search).to_have_attribute("aria-busy", "true")
    await own(search, "summary").click()
    fetch = search.locator(".step-children > li.msg-step")
    await own(fetch, "summary").click()
    await expect(own(fetch, ".step-output")).to_contain_text("first second")
    await expect(fetch).to_have_attribute("data-state", "running")
    await chat.shot("50-steps-running")
    await chat.wait_reply("found 3 for rain")
    await expect(own(fetch, ".step-output")).to_contain_text("first second third")
    await expect(search).to_have_attribute("aria-busy", "false")
    await chat.page.reload()
    await chat.wait_reply("found 3 for rain")

    await check_collapsed_steps(chat)
    await chat.shot("51-steps-collapsed")
    await open_and_check(chat)
    await chat.shot("52-steps-open-after-reload")

    # Dark theme: the same steps, readable.
    await chat.page.emulate_media(color_scheme="dark")
    await chat.shot("53-steps-open-dark")


async def test_the_engines_tool_call_renders_as_a_step(engine_server, page_context, make_user):
    chat = Chat(await page_context.new_page(), engine_server.url)
    await chat.sign_in(make_user())
    await expect(chat.locator(".msg-assistant .msg-body")).to_have_text(GREETING)  # ready for input
    await chat.send("!tool\nping")  # a directive line, then the text
    await chat.wait_reply("Echo #1: ping")
    tool = top_step(chat, "echo_tool")
    await expect(tool).to_have_attribute("data-state", "done")
    await expect(own(tool, ".step-label")).to_have_text("Used echo_tool")
    await own(tool, "summary").click()
    await expect(own(tool, ".step-input")).to_contain_text('"text": "ping"')
    await expect(own(tool, ".step-output")).to_contain_text("PING")
    await chat.page.reload()
    await chat.wait_reply("Echo #1: ping")
    await expect(own(top_step(chat, "echo_tool"), ".step-duration")).to_have_text(DURATION)
    await chat.shot("54-engine-tool-step")
