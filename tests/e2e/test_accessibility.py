"""axe-core on the chat page with every feature on screen, in both themes.

axe-core (vendored in ``tests/e2e/vendor/axe-core``, never served by Tether) is evaluated in the
page through Playwright, which the page's Content-Security-Policy does not apply to. The page
runs ``examples.showcase_app``, the example app that uses every part of the hooks API; the test
brings each on screen (starters and the profile picker, closed and open, on the empty chat; then steps opened,
code, an action button and feedback; math and every kind of element with the side panel open;
the chat settings dialog; a question with choices), and axe's default rules (WCAG 2.x A and
AA, and its best practices) must find nothing, in the light and the dark theme.
"""

from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser, expect

from tests.e2e.test_web_ui import DESKTOP, PAGE_PROBES, TIMEOUT_MS, Chat

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

AXE = (Path(__file__).parent / "vendor" / "axe-core" / "axe.min.js").read_text()


@pytest.fixture(scope="module")
def showcase_server(server_factory: Any) -> Any:
    return server_factory.start(CHAT_APP="examples.showcase_app")


async def axe_violations(chat: Chat) -> list[str]:
    """What axe finds on the page as it is now: one line per rule and offending node."""
    if not await chat.page.evaluate("typeof window.axe === 'object'"):
        await chat.page.evaluate(AXE)
    results = await chat.page.evaluate("axe.run(document, {resultTypes: ['violations']})")
    return [
        f"{violation['id']} ({violation['impact']}): {node['target']} {node.get('failureSummary', '')}"
        for violation in results["violations"]
        for node in violation["nodes"]
    ]


async def set_theme(chat: Chat, theme: str) -> None:
    await chat.set_theme(theme)
    await expect(chat.locator("html")).to_have_attribute("data-theme", theme)


async def check_both_themes(chat: Chat, screen: str) -> None:
    for theme in ("light", "dark"):
        await set_theme(chat, theme)
        await chat.shot(f"axe-{screen}-{theme}")
        assert await axe_violations(chat) == [], f"axe on the {screen} screen, {theme} theme"


async def test_axe_finds_nothing_on_the_chat_page_with_every_feature_in_both_themes(
    browser: Browser, showcase_server: Any, make_user: Any
) -> None:
    context = await browser.new_context(viewport=DESKTOP)
    context.set_default_timeout(TIMEOUT_MS)
    await context.add_init_script(PAGE_PROBES)
    try:
        chat = Chat(await context.new_page(), showcase_server.url)
        await chat.sign_in(make_user())

        # The empty chat: starters and the profile picker, closed and open (the theme is set
        # first: the account menu would close the profile list).
        await expect(chat.locator("#starters button").first).to_be_visible()
        await expect(chat.locator("#chat-profile")).to_be_visible()
        await check_both_themes(chat, "empty-chat")
        for theme in ("light", "dark"):
            await set_theme(chat, theme)
            await chat.locator("#chat-profile").click()
            await expect(chat.page.get_by_role("listbox", name="Profile")).to_be_visible()
            await chat.shot(f"axe-profile-menu-{theme}")
            assert await axe_violations(chat) == [], f"axe on the open profile menu, {theme} theme"
            await chat.page.keyboard.press("Escape")
            await expect(chat.page.get_by_role("listbox", name="Profile")).to_be_hidden()

        # A conversation: steps (opened, one nested), a reply with code (highlighted, Copy
        # buttons), an action button and feedback thumbs.
        await chat.send("show me code")
        await expect(chat.locator("#transcript pre code.language-python.hljs")).to_be_visible()
        await expect(chat.locator("#transcript .feedback-up").first).to_be_visible()
        await expect(chat.page.get_by_role("button", name="Explain it")).to_be_visible()
        search = chat.locator("#transcript > li.msg-step").first
        await search.locator(":scope > details > summary").click()
        await expect(search.locator(".step-children > li.msg-step")).to_have_count(1)
        await search.locator(".step-children > li.msg-step > details > summary").click()
        await check_both_themes(chat, "conversation")

        # Math, and elements: an image, a plot, a text, a file, a PDF opened in the side panel.
        await chat.send("math")
        await expect(chat.locator("#transcript .katex").first).to_be_visible()
        await chat.send("report")
        await expect(chat.locator("#transcript img.element-image")).to_be_visible()
        await expect(chat.locator("#transcript .element-plotly[data-rendered=true]")).to_have_count(1)
        await chat.locator("#transcript button.element-link", has_text="guide.pdf").click()
        await expect(chat.locator("#element-panel iframe.element-pdf")).to_be_visible()
        await check_both_themes(chat, "elements")
        await chat.locator("#element-panel .element-panel-close").click()

        # The chat settings panel, open.
        await chat.page.get_by_role("button", name="Chat settings").click()
        await expect(chat.page.get_by_role("dialog", name="Chat settings")).to_be_visible()
        await check_both_themes(chat, "settings")
        await chat.page.keyboard.press("Escape")
        await expect(chat.page.get_by_role("dialog", name="Chat settings")).to_be_hidden()
        await chat.assert_clean()

        # A question: the ask panel above the message box and the choices under the question.
        await chat.send("quiz")
        await expect(chat.locator("#ask-panel")).to_be_visible()
        await expect(chat.locator("#transcript .ask-choice").first).to_be_visible()
        await check_both_themes(chat, "ask")
        await chat.assert_clean()

        # The check can fail: a photo without a text alternative is found.
        await chat.page.evaluate(
            "document.querySelector('#transcript').append(Object.assign(document.createElement('img'),"
            " {src: 'data:image/gif;base64,R0lGODlhAQABAAAAACw=', width: 8, height: 8}))"
        )
        assert any(line.startswith("image-alt") for line in await axe_violations(chat))
    finally:
        await context.close()
