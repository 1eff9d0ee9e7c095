"""Math in the web UI, end to end: Playwright drives Debian's Chromium against a live daphne
running a hooks-API app (``tests.apps.math_app``) whose reply streams LaTeX cut in the middle
of its formulas. KaTeX is vendored: the page typesets ``$$...$$``, ``$...$`` and ``\\(...\\)``
with fonts from its own origin, leaves prices and code as text, and breaks no CSP rule
(``ThemedChat.assert_clean`` checks violations and requests to other origins)."""

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from playwright.async_api import Browser, expect

from tests.apps.math_app import MATH_REPLY
from tests.e2e.test_theme_ui import THEME_PROBES, ThemedChat
from tests.e2e.test_web_ui import DESKTOP, PAGE_PROBES, TIMEOUT_MS
from tests.support.waiting import wait_until_async

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def math_server(server_factory):
    return server_factory.start(CHAT_APP="tests.apps.math_app")


@pytest.fixture
async def open_math_chat(browser: Browser, math_server) -> AsyncIterator[Callable[[], Awaitable[ThemedChat]]]:
    contexts = []

    async def open_page() -> ThemedChat:
        context = await browser.new_context(viewport=DESKTOP, color_scheme="light")
        await context.grant_permissions(["clipboard-read", "clipboard-write"], origin=math_server.url)
        context.set_default_timeout(TIMEOUT_MS)
        await context.add_init_script(PAGE_PROBES)
        await context.add_init_script(THEME_PROBES)
        contexts.append(context)
        return ThemedChat(await context.new_page(), math_server.url)

    yield open_page
    for context in contexts:
        await context.close()


async def test_a_streamed_reply_typesets_its_math_and_keeps_prices_and_code_as_text(
    open_math_chat, make_user
):
    chat = await open_math_chat()
    fonts: list[str] = []
    scripts: list[str] = []
    chat.page.on("request", lambda r: fonts.append(r.url) if "/katex/fonts/" in r.url else None)
    chat.page.on("request", lambda r: scripts.append(r.url) if r.url.endswith("/katex.mjs") else None)
    await chat.sign_in(make_user())
    await expect(chat.locator("#composer")).to_be_visible()
    assert scripts == []  # KaTeX loads with the first formula, not with the page
    await chat.send("some maths please")
    reply = chat.locator("#transcript > .msg-assistant:not([data-streaming])")
    await expect(reply).to_have_count(1)
    body = reply.locator(".msg-body")

    # Display math: a KaTeX display block, with MathML for screen readers and the source kept.
    block = body.locator(".math-display .katex-display")
    await expect(block).to_have_count(1)
    await expect(block.locator(".katex-html")).to_have_attribute("aria-hidden", "true")
    await expect(block.locator("math annotation")).to_have_text("\\int_0^1 x^2\\,dx = \\frac{1}{3}")
    await expect(block.locator("math")).to_have_attribute("display", "block")

    # Inline math, $...$ and \(...\): the _ and * inside are math, not emphasis.
    inline = body.locator(".math-inline > .katex")
    await expect(inline).to_have_count(2)
    await expect(inline.nth(0).locator("annotation")).to_have_text("e^{i\\pi}+1=0")
    await expect(inline.nth(1).locator("annotation")).to_have_text("a_1 * b_1")
    await expect(body.locator("em, strong")).to_have_count(0)

    # Prices and code are text; a formula KaTeX cannot parse shows its source as an error.
    await expect(body.locator("p", has_text="It costs")).to_have_text(
        "It costs $5 and $6 in the shop; $x$ is code."
    )
    await expect(body.locator("code")).to_have_text("$x$")
    await expect(body.locator("code .katex")).to_have_count(0)
    error = body.locator(".katex-error")
    await expect(error).to_have_count(1)
    await expect(error).to_have_text("\\frac{1}{")
    assert await error.evaluate("n => getComputedStyle(n).color") == "rgb(179, 38, 30)"  # --danger

    # KaTeX's own fonts, from this origin, were used to draw the formulas.
    assert fonts and all(url.startswith(chat.base_url) and url.endswith(".woff2") for url in fonts)
    assert scripts == [f"{chat.base_url}/static/tether/vendor/katex/katex.mjs"]
    regular_loaded = (  # (the font arrives after the formula is drawn)
        "[...document.fonts].some(f => f.family === 'KaTeX_Main' && f.weight === '400'"
        " && f.style === 'normal' && f.status === 'loaded')"
    )
    await wait_until_async(lambda: chat.page.evaluate(regular_loaded))
    # Copying the reply gives the LaTeX as written.
    await reply.locator("button.copy-message").click()
    assert await chat.clipboard() == MATH_REPLY
    await chat.shot("60-math-light")

    # After a reload the reply (read from the thread) is typeset the same way.
    await chat.reload()
    await expect(reply.locator(".katex")).to_have_count(3)
    await chat.set_theme("dark")
    await chat.expect_theme("dark")
    await chat.shot("61-math-dark")
    await chat.assert_clean()


async def test_a_formula_cannot_draw_outside_its_box_and_a_long_one_stays_its_source(
    open_math_chat, make_user
):
    chat = await open_math_chat()
    await chat.sign_in(make_user())
    await chat.send("escape")
    body = chat.locator("#transcript > .msg-assistant").locator(".msg-body")
    await expect(body.locator(".katex")).to_have_count(2)

    # \rule{500em}{500em} is capped by KaTeX's maxSize (10em), not drawn 8,000 px tall.
    huge = body.locator(".math-display")
    font_px = await huge.evaluate("n => parseFloat(getComputedStyle(n).fontSize)")
    assert (await huge.bounding_box() or {"height": 1e9})["height"] < 14 * font_px

    # \llap draws its 30em rule to the left of the formula, over the text before it: the
    # formula's box clips it, so neither is it painted nor does it take clicks there.
    inline = body.locator(".math-inline:not(.math-too-long)")
    await inline.scroll_into_view_if_needed()
    box = await inline.bounding_box()
    rule = await inline.evaluate(
        "n => { const r = [...n.querySelectorAll('.rule')].at(-1).getBoundingClientRect();"
        " return {left: r.left, right: r.right, top: r.top, bottom: r.bottom}; }"
    )
    assert box is not None and rule["left"] < box["x"] - 100  # it reaches far outside
    outside = {"x": box["x"] - 20, "y": (rule["top"] + rule["bottom"]) / 2}  # on the rule, left of the box
    hit = await chat.page.evaluate(
        "p => { const n = document.elementFromPoint(p.x, p.y); return n ? !!n.closest('.katex') : null; }",
        outside,
    )
    assert hit is False
    assert await inline.evaluate("n => getComputedStyle(n).overflow") == "clip"

    # Over MATH_MAX_CHARS a formula is not typeset: its source is shown as text.
    long = body.locator(".math-too-long")
    await expect(long).to_have_count(1)
    await expect(long.locator(".katex")).to_have_count(0)
    assert (await long.text_content() or "").startswith("x+x+x+")
    await chat.assert_clean()
