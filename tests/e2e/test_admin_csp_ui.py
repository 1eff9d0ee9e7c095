"""The admin under its Content-Security-Policy, in Chromium against a live daphne: signing
in, the changelists and the change forms (with their calendar, select and password widgets)
run their scripts and raise no CSP violation."""

import uuid

import pytest
from asgiref.sync import sync_to_async
from playwright.async_api import Browser, expect

from tests.e2e.test_web_ui import DESKTOP, TIMEOUT_MS
from threads_app.services import ensure_thread

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

VIOLATIONS = """
window.__csp = [];
document.addEventListener("securitypolicyviolation", (e) => window.__csp.push(`${e.violatedDirective} ${e.blockedURI}`));
"""


@sync_to_async
def admin_and_thread(django_user_model) -> tuple[str, uuid.UUID]:
    name = f"csp-boss-{uuid.uuid4().hex[:6]}"
    django_user_model.objects.create_superuser(username=name, password="pw-for-tests-1")
    owner = django_user_model.objects.create_user(username=f"{name}-owner", password="pw-for-tests-1")
    thread, _ = ensure_thread(owner, uuid.uuid4(), name="a thread")
    return name, thread.pk


async def test_the_admin_works_under_its_policy(browser: Browser, server, django_user_model):
    name, thread_id = await admin_and_thread(django_user_model)
    context = await browser.new_context(viewport=DESKTOP)
    context.set_default_timeout(TIMEOUT_MS)
    await context.add_init_script(VIOLATIONS)
    page = await context.new_page()
    try:
        response = await page.goto(f"{server.url}/admin/login/")
        assert response is not None and "default-src 'self'" in response.headers["content-security-policy"]
        await page.fill("#id_username", name)
        await page.fill("#id_password", "pw-for-tests-1")
        await page.click("input[type=submit]")
        await expect(page.locator("#site-name")).to_be_visible()
        assert await page.evaluate("window.__csp") == []

        await page.goto(f"{server.url}/admin/threads_app/thread/{thread_id}/change/")
        await expect(page.locator("#content h1")).to_be_visible()
        assert await page.evaluate("window.__csp") == []

        # The user form's scripts: the date and time shortcuts are drawn by admin JS.
        await page.goto(f"{server.url}/admin/auth/user/add/")
        await expect(page.locator("#id_username")).to_be_visible()
        await page.goto(f"{server.url}/admin/auth/user/")
        await page.locator("#result_list tbody a").first.click()
        await expect(page.locator(".datetimeshortcuts").first).to_be_visible()
        await page.locator(".datetimeshortcuts a", has_text="Today").first.click()
        await page.locator(
            ".datetimeshortcuts .clock-icon, .datetimeshortcuts a[id^=clocklink]"
        ).first.click()
        await expect(page.locator(".clockbox").first).to_be_visible()
        # The permission pickers (SelectFilter2): a filter box drawn by script.
        await expect(page.locator(".selector-filter input").first).to_be_visible()
        assert await page.evaluate("window.__csp") == []
    finally:
        await context.close()
