"""The sidebar groups the user's chats by date (Today, Yesterday, Previous 7 days, Previous
30 days, then by month) in the user's time zone, translated; in Chromium, with the chats'
times set in the database and the browser in two time zones 25 hours apart, so that a chat
is "Today" in one and "Yesterday" in the other. The expected groups are computed here, in
Python, by the same rules."""

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from asgiref.sync import sync_to_async
from playwright.async_api import Browser, expect

from tests.e2e.test_page_screens import SHOTS, Screens
from tests.e2e.test_web_ui import DESKTOP, TIMEOUT_MS, Chat
from threads_app import services
from threads_app.models import Thread

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

AHEAD, BEHIND = "Pacific/Kiritimati", "Pacific/Pago_Pago"  # UTC+14, UTC-11
FRENCH = {
    "Today": "Aujourd\u2019hui",
    "Yesterday": "Hier",
    "Previous 7 days": "7 jours précédents",
    "Previous 30 days": "30 jours précédents",
}
FRENCH_MONTHS = [
    "janvier",
    "février",
    "mars",
    "avril",
    "mai",
    "juin",
    "juillet",
    "août",
    "septembre",
    "octobre",
    "novembre",
    "décembre",
]


@pytest.fixture(scope="module")
def showcase_server(server_factory: Any) -> Any:
    SHOTS.mkdir(parents=True, exist_ok=True)
    return server_factory.start(CHAT_APP="examples.showcase_app")


def group_of(when: datetime, now: datetime, zone: str) -> str:
    """The English label of ``when``'s group at ``now`` in ``zone`` (date_groups.js's rules)."""
    days = (now.astimezone(ZoneInfo(zone)).date() - when.astimezone(ZoneInfo(zone)).date()).days
    if days <= 0:
        return "Today"
    if days == 1:
        return "Yesterday"
    if days <= 7:
        return "Previous 7 days"
    if days <= 30:
        return "Previous 30 days"
    return when.astimezone(ZoneInfo(zone)).strftime("%B %Y")


def expected_groups(threads: list[tuple[str, datetime]], now: datetime, zone: str) -> list[list[Any]]:
    groups: list[list[Any]] = []
    for name, when in sorted(threads, key=lambda t: t[1], reverse=True):
        label = group_of(when, now, zone)
        if groups and groups[-1][0] == label:
            groups[-1][1].append(name)
        else:
            groups.append([label, [name]])
    return groups


def make_threads(user: Any, now: datetime) -> list[tuple[str, datetime]]:
    # A time at which the two zones disagree on the day (one says Today, the other Yesterday).
    boundary = next(
        now - timedelta(minutes=30 * k)
        for k in range(1, 97)
        if {group_of(now - timedelta(minutes=30 * k), now, z) for z in (AHEAD, BEHIND)}
        == {"Today", "Yesterday"}
    )
    threads = [
        ("just now", now - timedelta(minutes=1)),
        ("at the day's edge", boundary),
        ("three days ago", now - timedelta(days=3, hours=1)),
        ("twenty days ago", now - timedelta(days=20)),
        ("seventy-five days ago", now - timedelta(days=75)),
        ("four hundred days ago", now - timedelta(days=400)),
    ]
    for name, when in threads:
        thread, _ = services.ensure_thread(user, uuid.uuid4(), name=name)
        Thread.objects.filter(pk=thread.pk).update(updated_at=when, created_at=when)
    return threads


async def shown_groups(chat: Chat) -> list[list[Any]]:
    groups: list[list[Any]] = await chat.page.eval_on_selector_all(
        "#thread-list > .thread-group",
        """groups => groups.map(g => [
          g.querySelector(".thread-group-title").textContent,
          [...g.querySelectorAll(".thread-link")].map(a => a.textContent),
        ])""",
    )
    return groups


@pytest.mark.parametrize("zone", [AHEAD, BEHIND])
async def test_the_sidebar_groups_chats_by_day_in_the_users_time_zone(
    browser: Browser, showcase_server: Any, make_user: Any, zone: str
) -> None:
    user = make_user()
    now = datetime.now(UTC)
    threads = await sync_to_async(make_threads)(user, now)
    expected = expected_groups(threads, now, zone)
    assert expected != expected_groups(threads, now, AHEAD if zone == BEHIND else BEHIND)  # the zone matters
    context = await browser.new_context(viewport=DESKTOP, timezone_id=zone, locale="en-US")
    context.set_default_timeout(TIMEOUT_MS)
    try:
        chat = Chat(await context.new_page(), showcase_server.url)
        await chat.sign_in(user)
        await expect(chat.thread_links).to_have_count(len(threads))
        assert await shown_groups(chat) == expected
        # Each group is a list named by its heading.
        today = chat.page.get_by_role("list", name="Today")
        await expect(today.get_by_role("link", name="just now")).to_be_visible()
        screens = Screens(chat, "desktop")
        await screens.check(f"sidebar-groups-{zone.split('/')[1].lower()}")
        assert screens.problems == [], "\n".join(screens.problems)
        # Deleting the only chat of a group takes its heading away.
        last = expected[-1]
        await chat.locator("#thread-list .thread-item", has_text=last[1][-1]).locator(".delete").click()
        await chat.page.get_by_role("button", name="Delete").last.click()
        await expect(chat.thread_links).to_have_count(len(threads) - 1)
        if len(last[1]) == 1:
            await expect(chat.page.get_by_role("heading", name=last[0])).to_have_count(0)
        assert chat.errors == [], chat.errors
    finally:
        await context.close()


async def test_the_groups_are_in_french_for_a_french_browser(
    browser: Browser, showcase_server: Any, make_user: Any
) -> None:
    user = make_user()
    now = datetime.now(UTC)
    threads = await sync_to_async(make_threads)(user, now)
    expected = expected_groups(threads, now, AHEAD)
    context = await browser.new_context(viewport=DESKTOP, timezone_id=AHEAD, locale="fr-FR")
    context.set_default_timeout(TIMEOUT_MS)
    try:
        chat = Chat(await context.new_page(), showcase_server.url)
        await chat.sign_in(user)
        await expect(chat.thread_links).to_have_count(len(threads))
        shown = await shown_groups(chat)
        assert [names for _, names in shown] == [names for _, names in expected], shown
        for (label, _), (english, _) in zip(shown, expected, strict=True):
            if english in FRENCH:
                assert label == FRENCH[english], shown
            else:
                month, year = english.split()
                assert label == f"{FRENCH_MONTHS[datetime.strptime(month, '%B').month - 1]} {year}", shown
    finally:
        await context.close()
