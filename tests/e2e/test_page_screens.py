"""The chat page's screens on a desktop (1280x800) and a phone (390x844), light and dark,
against the showcase app: each screen is photographed, axe-core finds no violation on it, and
its layout holds (nothing wider than the viewport, the composer and the last message in view).

Screens: the first screen (starters), a report (image, plot, PDF, text, file), a file ask
(its question in view), the settings dialog, an error toast (a file the server takes no such
type of). ``SCREENSHOTS_DIR`` (optional) is where the PNGs go, ``SCREENSHOTS_SUFFIX`` what
their names end with; by default ``test-artifacts/screenshots/``.

Problems are gathered screen by screen and reported together at the end, so that one run
shows every screen's evidence.
"""

import os
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser, ViewportSize, expect

from tests.e2e.test_accessibility import AXE
from tests.e2e.test_page_layout import TOO_WIDE, report_drawn
from tests.e2e.test_web_ui import DESKTOP, PAGE_PROBES, PHONE, SCREENSHOTS, TIMEOUT_MS, Chat

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SHOTS = Path(os.environ.get("SCREENSHOTS_DIR") or SCREENSHOTS)
SUFFIX = os.environ.get("SCREENSHOTS_SUFFIX", "")

# The composer's box and the viewport's height: the composer must be wholly on screen.
COMPOSER_IN_VIEW = """() => {
  const box = document.querySelector("#composer").getBoundingClientRect();
  return box.top >= 0 && box.bottom <= document.documentElement.clientHeight + 1;
}"""


@pytest.fixture(scope="module")
def showcase_server(server_factory: Any) -> Any:
    SHOTS.mkdir(parents=True, exist_ok=True)
    return server_factory.start(CHAT_APP="examples.showcase_app")


class Screens:
    """Photographs and checks each screen in both themes; gathers what fails."""

    def __init__(self, chat: Chat, device: str) -> None:
        self.chat = chat
        self.device = device
        self.problems: list[str] = []

    async def check(self, screen: str) -> None:
        page = self.chat.page
        for theme in ("light", "dark"):
            await page.emulate_media(color_scheme=theme)
            await expect(page.locator("html")).to_have_attribute("data-theme", theme)
            await page.wait_for_timeout(150)
            await page.screenshot(path=str(SHOTS / f"{screen}-{self.device}-{theme}{SUFFIX}.png"))
            if not await page.evaluate("typeof window.axe === 'object'"):
                await page.evaluate(AXE)
            results = await page.evaluate("axe.run(document, {resultTypes: ['violations']})")
            for violation in results["violations"]:
                for node in violation["nodes"]:
                    self.problems.append(
                        f"{screen} {self.device} {theme}: axe {violation['id']} {node['target']}"
                    )
        found = await page.evaluate(TOO_WIDE)
        if found["wide"] or found["sideways"] > 0:
            self.problems.append(f"{screen} {self.device}: wider than {found['width']} px: {found}")
        if not await page.evaluate(COMPOSER_IN_VIEW):
            self.problems.append(f"{screen} {self.device}: the composer is not wholly on screen")


@pytest.mark.parametrize("device", ["desktop", "phone"])
async def test_every_screen_in_both_themes(
    browser: Browser, showcase_server: Any, make_user: Any, device: str, tmp_path: Path
) -> None:
    viewport: ViewportSize = DESKTOP if device == "desktop" else PHONE
    context = await browser.new_context(viewport=viewport)
    context.set_default_timeout(TIMEOUT_MS)
    await context.add_init_script(PAGE_PROBES)
    try:
        chat = Chat(await context.new_page(), showcase_server.url)
        screens = Screens(chat, device)
        await chat.sign_in(make_user())
        await expect(chat.locator("#starters button").first).to_be_visible()
        await screens.check("first-screen")

        await chat.send("report")
        await report_drawn(chat)
        await chat.page.wait_for_timeout(300)
        await screens.check("report")

        await chat.send("upload")
        await expect(chat.locator("#ask-panel")).to_be_visible()
        question = chat.locator("#transcript > .msg-assistant .msg-body", has_text="Send me a photo.")
        if not await question.evaluate(
            "node => { const b = node.getBoundingClientRect(), l = document.querySelector('#messages')"
            ".getBoundingClientRect(); return b.top >= l.top && b.bottom <= l.bottom; }"
        ):
            screens.problems.append(f"ask-file {device}: the question is not in view")
        await screens.check("ask-file")

        not_a_photo = tmp_path / "notes.txt"
        not_a_photo.write_text("not a photo")
        await chat.locator("#file-input").set_input_files(str(not_a_photo))
        toast = chat.page.get_by_role("alert").filter(has_text="Only photos can be attached.")
        await expect(toast).to_be_visible()
        gap = await toast.evaluate(
            "node => document.querySelector('#composer').getBoundingClientRect().top - node.getBoundingClientRect().bottom"
        )
        if not 0 <= gap <= 40:
            screens.problems.append(f"error-toast {device}: {gap} px between the toast and the composer")
        await screens.check("error-toast")
        await toast.get_by_role("button", name="Dismiss").click()
        await expect(toast).to_have_count(0)
        await expect(chat.locator("#message-input")).to_be_focused()

        await chat.page.get_by_role("button", name="Chat settings").click()
        await expect(chat.page.get_by_role("dialog", name="Chat settings")).to_be_visible()
        await screens.check("settings")

        assert screens.problems == [], "\n".join(screens.problems)
    finally:
        await context.close()
