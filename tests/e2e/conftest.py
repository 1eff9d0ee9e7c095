"""Fixtures every browser test shares."""

from collections.abc import AsyncIterator

import pytest
from playwright.async_api import Browser, async_playwright

from tests.e2e.test_web_ui import CHROMIUM, CHROMIUM_ARGS, require_chromium


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    """A Chromium per test (it starts in well under a second): Playwright's objects belong to
    the event loop that made them, and each async test has its own."""
    require_chromium()
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        await launched.close()
