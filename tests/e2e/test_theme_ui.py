"""The theme switch and code blocks in the web UI, end to end: Playwright drives Debian's
Chromium against a live daphne running a hooks-API app (``tests.apps.code_app``) whose replies
carry a fenced python block.

- The theme (light, dark, or the system's) is chosen in the top bar, kept across a reload and
  on ``<html data-theme>`` before the first frame; "system" follows an emulated
  ``prefers-color-scheme`` live. The colours checked are the computed ones.
- A reply's python block is highlighted (highlight.js's spans, in each theme's colours); its
  Copy button, and the reply's own, put the exact text on the clipboard (read back) and say so,
  to screen readers too.
- Every page here is also checked for console errors, besides ``Chat.assert_clean``'s checks
  (which include Content-Security-Policy violations and requests to other origins).

Screenshots go to ``test-artifacts/screenshots/`` like those of ``test_web_ui.py``, whose page
helpers (``Chat``, the probes) this reuses.
"""

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from playwright.async_api import Browser, expect

from tests.apps.code_app import CODE, CODE_REPLY
from tests.e2e.test_web_ui import (
    DESKTOP,
    PAGE_PROBES,
    TIMEOUT_MS,
    Chat,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Runs before any script of every page: the theme <html> had when the parser reached <body>
# (nothing of the page can be painted before then).
THEME_PROBES = """
window.__themeAtBody = "unseen";
new MutationObserver((records, observer) => {
  if (!document.body) return;
  window.__themeAtBody = document.documentElement.getAttribute("data-theme");
  observer.disconnect();
}).observe(document, { childList: true, subtree: true });
"""

# tether.css's --bg and two token colours, per theme, as computed styles give them.
BG = {"light": "rgb(245, 246, 248)", "dark": "rgb(20, 22, 27)"}
KEYWORD = {"light": "rgb(194, 32, 45)", "dark": "rgb(255, 123, 114)"}
STRING = {"light": "rgb(10, 48, 105)", "dark": "rgb(165, 214, 255)"}


class ThemedChat(Chat):
    def __init__(self, page, base_url: str) -> None:
        super().__init__(page, base_url)
        self.console_errors: list[str] = []
        page.on("console", lambda m: self.console_errors.append(m.text) if m.type == "error" else None)

    async def background(self) -> str:
        return str(await self.page.evaluate("getComputedStyle(document.body).backgroundColor"))

    async def expect_theme(self, theme: str) -> None:
        await expect(self.locator("html")).to_have_attribute("data-theme", theme)
        assert await self.background() == BG[theme]

    async def clipboard(self) -> str:
        return str(await self.page.evaluate("navigator.clipboard.readText()"))

    async def assert_clean(self) -> None:
        await super().assert_clean()
        assert self.console_errors == []


@pytest.fixture(scope="module")
def code_server(server_factory):
    return server_factory.start(CHAT_APP="tests.apps.code_app")


@pytest.fixture
async def open_code_chat(browser: Browser, code_server) -> AsyncIterator[Callable[[], Awaitable[ThemedChat]]]:
    contexts = []

    async def open_page() -> ThemedChat:
        context = await browser.new_context(viewport=DESKTOP, color_scheme="light")
        await context.grant_permissions(["clipboard-read", "clipboard-write"], origin=code_server.url)
        context.set_default_timeout(TIMEOUT_MS)
        await context.add_init_script(PAGE_PROBES)
        await context.add_init_script(THEME_PROBES)
        contexts.append(context)
        return ThemedChat(await context.new_page(), code_server.url)

    yield open_page
    for context in contexts:
        await context.close()


async def test_dark_is_kept_across_a_reload_and_system_follows_the_os_setting(open_code_chat, make_user):
    chat = await open_code_chat()
    await chat.sign_in(make_user())
    await chat.page.get_by_role("button", name="Account and theme").click()
    theme = chat.page.get_by_role("radiogroup", name="Theme")
    await expect(theme).to_have_count(1)  # the control is labelled
    assert await chat.theme_choice() == "system"
    await theme.get_by_role("radio", name="Dark").check()  # by pointer; set_theme is the keyboard's way
    await chat.expect_theme("dark")
    await chat.page.mouse.click(640, 400)  # a click elsewhere closes the menu
    await expect(theme).to_be_hidden()
    await chat.set_theme("system")
    await chat.expect_theme("light")  # the emulated system setting

    await chat.set_theme("dark")
    await chat.expect_theme("dark")
    assert await chat.page.evaluate("localStorage.getItem('tether.theme')") == "dark"

    # A reload is dark before anything of it can be painted, and the control says so.
    await chat.reload()
    await chat.expect_theme("dark")
    assert await chat.theme_choice() == "dark"
    assert await chat.page.evaluate("window.__themeAtBody") == "dark"
    await chat.page.emulate_media(color_scheme="light")  # an explicit choice ignores the system
    await chat.expect_theme("dark")

    # "System" follows the system's setting, live, and after a reload.
    await chat.set_theme("system")
    await chat.expect_theme("light")
    await chat.page.emulate_media(color_scheme="dark")
    await chat.expect_theme("dark")
    await chat.page.emulate_media(color_scheme="light")
    await chat.expect_theme("light")
    await chat.page.emulate_media(color_scheme="dark")
    await chat.reload()
    await chat.expect_theme("dark")
    assert await chat.theme_choice() == "system"
    assert await chat.page.evaluate("localStorage.getItem('tether.theme')") is None

    # Light, chosen, wins over a dark system.
    await chat.set_theme("light")
    await chat.expect_theme("light")
    await chat.reload()
    await chat.expect_theme("light")
    await chat.assert_clean()


async def test_a_python_block_is_highlighted_in_both_themes_and_copies_exactly(open_code_chat, make_user):
    chat = await open_code_chat()
    await chat.sign_in(make_user())
    await chat.send("show me some code")
    reply = chat.locator("#transcript > .msg-assistant:not([data-streaming])")
    await expect(reply).to_have_count(1)
    block = reply.locator(".code-block")
    await expect(block).to_have_count(1)
    code = block.locator("pre code")

    # Highlighted: highlight.js's spans, and the text unchanged.
    await expect(block.locator(".code-lang")).to_have_text("python")
    await expect(code).to_have_class("language-python hljs")
    await expect(code.locator("span.hljs-keyword").first).to_have_text("def")
    await expect(code.locator("span.hljs-title.function_")).to_have_text("greet")
    await expect(code.locator("span.hljs-comment")).to_have_text("# say hi")
    assert await code.locator("span.hljs-string").count() >= 2
    assert await code.evaluate("node => node.textContent") == CODE

    # Each theme colours the tokens its own way.
    keyword = code.locator("span.hljs-keyword").first
    string = code.locator("span.hljs-string").first
    colour = "node => getComputedStyle(node).color"
    assert (await keyword.evaluate(colour), await string.evaluate(colour)) == (
        KEYWORD["light"],
        STRING["light"],
    )
    await chat.shot("40-code-block-light")
    await chat.set_theme("dark")
    await chat.expect_theme("dark")
    assert (await keyword.evaluate(colour), await string.evaluate(colour)) == (
        KEYWORD["dark"],
        STRING["dark"],
    )
    await chat.shot("41-code-block-dark")

    # The block's Copy button: the exact code, "Copied" on the button and for screen readers.
    copy_code = block.locator("button.copy-code")
    await expect(copy_code).to_have_accessible_name("Copy code")
    await copy_code.click()
    await expect(copy_code).to_have_text("Copied")
    await expect(chat.locator("#copy-status")).to_have_text("Copied to the clipboard")
    await expect(chat.locator("#copy-status")).to_have_attribute("aria-live", "polite")
    assert await chat.clipboard() == CODE
    await expect(copy_code).to_have_text("Copy")  # back after a moment

    # The reply's Copy button: the whole reply as written (markdown).
    copy_message = reply.locator(".msg-actions button.copy-message")
    await expect(copy_message).to_have_accessible_name("Copy message")
    await copy_message.click()
    await expect(copy_message).to_have_text("Copied")
    assert await chat.clipboard() == CODE_REPLY
    # The user's message has no Copy button; the reply's feedback sits beside its Copy.
    await expect(chat.locator("#transcript > .msg-user .copy-message")).to_have_count(0)
    await expect(reply.locator(".msg-actions .feedback")).to_have_count(1)

    # Read back from the thread after a reload: highlighted still, in the theme kept.
    await chat.reload()
    await chat.expect_theme("dark")
    await expect(reply.locator("pre code span.hljs-keyword").first).to_have_text("def")
    assert await reply.locator("pre code").evaluate("node => node.textContent") == CODE
    await chat.assert_clean()


async def test_a_streaming_reply_has_no_copy_button_until_it_is_finished(open_code_chat, make_user):
    """Copy takes a finished reply only; a half-streamed one would copy half."""
    chat = await open_code_chat()
    await chat.sign_in(make_user())
    seen_streaming_copy = await chat.page.evaluate(
        """() => { window.__streamingCopy = 0;
          new MutationObserver(() => {
            if (document.querySelector("#transcript > .msg[data-streaming] .copy-message")) window.__streamingCopy++;
          }).observe(document.getElementById("transcript"), { childList: true, subtree: true, attributes: true });
          return window.__streamingCopy; }"""
    )
    await chat.send("again")
    await expect(
        chat.locator("#transcript > .msg-assistant:not([data-streaming]) .copy-message")
    ).to_have_count(1)
    assert seen_streaming_copy == 0
    assert await chat.page.evaluate("window.__streamingCopy") == 0
    await chat.assert_clean()
