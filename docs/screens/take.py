"""Photograph the six chat-page screens that issue 25 changed most, for docs/screens/.

Standalone on purpose: it drives any Tether checkout's page (the one before issue 25 and
today's) through what both have in common, so the same steps give the "before" and the
"after" set. The server must run the showcase app (``CHAT_APP=examples.showcase_app``) and
``USERNAME`` must be able to sign in; use a fresh user, since the desktop's first screen shows
the chats this run made in the sidebar.

    python docs/screens/take.py http://127.0.0.1:8000 USERNAME PASSWORD docs/screens/after

Desktop (1280x800) light: first-screen, code-reply, report, read-back, ask-file, error-toast;
phone (390x844) dark: first-screen, report, ask-file. Files are ``<screen>-<device>-<theme>.png``,
quantised to a palette to keep them small. Chromium is Debian's (``CHROMIUM_PATH``, default
/usr/bin/chromium); no browser is downloaded.
"""

import argparse
import asyncio
import os
import re
import tempfile
from pathlib import Path
from typing import Literal

from PIL import Image
from playwright.async_api import BrowserContext, Page, ViewportSize, async_playwright, expect

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run"]
DESKTOP: ViewportSize = {"width": 1280, "height": 800}
PHONE: ViewportSize = {"width": 390, "height": 844}
Theme = Literal["light", "dark"]
TIMEOUT_MS = 30_000
REPORT = "Here is this week's report."
CODE_REPLY = "Here is a function:"
ASK_QUESTION = "Send me a photo."
PHOTOS_ONLY = "Only photos can be attached."
# A reply's images loaded and its plot drawn: the report has its full height.
REPORT_DRAWN = """() => document.querySelector('#transcript .element-plotly[data-rendered=true]') &&
  [...document.querySelectorAll('#transcript img.element-image')].every(i => i.complete && i.naturalWidth)"""


class Shooter:
    """One signed-in tab on one device and theme; photographs screens into ``out``."""

    def __init__(self, page: Page, base_url: str, device: str, theme: Theme, out: Path) -> None:
        self.page = page
        self.base_url = base_url
        self.device = device
        self.theme = theme
        self.out = out

    async def sign_in(self, username: str, password: str) -> None:
        await self.page.goto(f"{self.base_url}/")
        await self.page.fill("#id_username", username)
        await self.page.fill("#id_password", password)
        await self.page.click("button[type=submit]")
        await expect(self.page).to_have_url(f"{self.base_url}/")
        await self.connected()

    async def connected(self) -> None:
        await expect(self.page.locator("body")).to_have_attribute("data-connection", "up")

    async def new_chat(self) -> None:
        """Press "New chat" (on a phone it is in the sidebar, opened first)."""
        button = self.page.locator("#new-chat")
        if not await button.is_visible():
            await self.page.click("#sidebar-toggle")
        async with self.page.expect_navigation(url=f"{self.base_url}/"):
            await button.click()
        await self.connected()

    async def send(self, text: str) -> None:
        await self.page.fill("#message-input", text)
        await self.page.press("#message-input", "Enter")

    async def reply_done(self, starts_with: str) -> None:
        finished = self.page.locator("#transcript > .msg-assistant:not([data-streaming]) .msg-body")
        await expect(finished.filter(has_text=re.compile(rf"^\s*{re.escape(starts_with)}"))).to_have_count(1)

    async def shot(self, screen: str) -> None:
        """Settle (fonts, transitions, a following scroll), photograph, quantise."""
        await self.page.evaluate("document.fonts.ready")
        await self.page.wait_for_timeout(600)
        path = self.out / f"{screen}-{self.device}-{self.theme}.png"
        await self.page.screenshot(path=str(path))
        Image.open(path).convert("RGB").quantize(colors=256, dither=Image.Dither.NONE).save(
            path, optimize=True
        )
        print(f"{path} {path.stat().st_size // 1024} KB")

    async def first_screen(self) -> None:
        await expect(self.page.locator("#starters button").first).to_be_visible()
        await self.shot("first-screen")

    async def code_reply(self) -> None:
        await self.send("show me code")
        await self.reply_done(CODE_REPLY)
        await self.shot("code-reply")

    async def report(self) -> None:
        await self.send("report")
        await self.reply_done(REPORT)
        await self.page.wait_for_function(REPORT_DRAWN)
        await self.shot("report")

    async def read_back(self) -> None:
        """The user scrolled up to the report's plot: today's page offers "jump to latest"."""
        await self.page.evaluate("document.querySelector('#messages').scrollTop = 1e6")
        await self.page.wait_for_timeout(300)
        await self.page.evaluate(
            "document.querySelector('#transcript .element-plotly').scrollIntoView({block: 'start'})"
        )
        await self.shot("read-back")

    async def ask_file(self) -> None:
        await self.send("upload")
        await expect(self.page.locator("#ask-panel")).to_be_visible()
        await self.shot("ask-file")

    async def error_toast(self, scratch: Path) -> None:
        not_a_photo = scratch / "notes.txt"
        not_a_photo.write_text("not a photo")
        await self.page.locator("#file-input").set_input_files(str(not_a_photo))
        await expect(self.page.get_by_text(PHOTOS_ONLY).first).to_be_visible()
        await self.shot("error-toast")


async def tab(context: BrowserContext, args: argparse.Namespace, device: str, theme: Theme) -> Shooter:
    page = await context.new_page()
    await page.emulate_media(color_scheme=theme)  # both pages default to the system theme
    shooter = Shooter(page, args.url.rstrip("/"), device, theme, args.out)
    await shooter.sign_in(args.username, args.password)
    return shooter


async def take(args: argparse.Namespace) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            with tempfile.TemporaryDirectory() as scratch:
                desktop = await browser.new_context(viewport=DESKTOP, color_scheme="light")
                desktop.set_default_timeout(TIMEOUT_MS)
                shooter = await tab(desktop, args, "desktop", "light")
                await shooter.code_reply()
                await shooter.new_chat()
                await shooter.report()
                await shooter.read_back()
                await shooter.new_chat()
                await shooter.ask_file()
                await shooter.error_toast(Path(scratch))
                await shooter.new_chat()  # last, so that the sidebar lists the chats above
                await shooter.first_screen()
                await desktop.close()

                phone = await browser.new_context(viewport=PHONE, color_scheme="dark")
                phone.set_default_timeout(TIMEOUT_MS)
                shooter = await tab(phone, args, "phone", "dark")
                await shooter.first_screen()
                await shooter.report()
                await shooter.new_chat()
                await shooter.ask_file()
                await phone.close()
        finally:
            await browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("url", help="the server, e.g. http://127.0.0.1:8000")
    parser.add_argument("username")
    parser.add_argument("password")
    parser.add_argument("out", type=Path, help="where the PNGs go")
    asyncio.run(take(parser.parse_args()))


if __name__ == "__main__":
    main()
