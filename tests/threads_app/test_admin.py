"""The admin pages used to inspect conversations and session records."""

import re
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client
from django.utils import timezone

from sessions_app.models import SocketSession
from threads_app.models import Step
from threads_app.services import ensure_thread, upsert_step

pytestmark = pytest.mark.django_db

FLAGS = ("is_connected", "chat_started", "resumed", "has_first_interaction", "ended")


@pytest.fixture
def admin_client_(django_user_model) -> Client:  # type: ignore[no-untyped-def]
    admin = django_user_model.objects.create_superuser(
        username="boss", email="boss@example.com", password="pw-for-tests-1"
    )
    client = Client()
    client.force_login(admin)
    return client


@pytest.fixture
def alice(django_user_model):  # type: ignore[no-untyped-def]
    return django_user_model.objects.create_user(username="alice-owner", password="pw-for-tests-1")


@pytest.fixture
def bob(django_user_model):  # type: ignore[no-untyped-def]
    return django_user_model.objects.create_user(username="bob-owner", password="pw-for-tests-1")


def row_of(html: str, text: str) -> str:
    """The changelist row (``<tr>...</tr>``) that mentions ``text``."""
    rows = [row for row in re.findall(r"<tr>.*?</tr>", html, flags=re.S) if text in row]
    assert len(rows) == 1, f"expected one row with {text!r}, found {len(rows)}"
    return rows[0]


def cell(row: str, field: str) -> str:
    """The text of the ``field-<field>`` cell of a changelist row."""
    match = re.search(rf'<t[dh] class="field-{field}(?: [^"]*)?"[^>]*>(.*?)</t[dh]>', row, flags=re.S)
    assert match is not None, f"no {field} cell"
    return re.sub(r"<[^>]+>", "", match.group(1)).strip()


def flag(row: str, field: str) -> bool:
    """The value of a boolean column, read from the admin's yes/no icon."""
    match = re.search(rf'<td class="field-{field}[^"]*"[^>]*><img [^>]*alt="(True|False)"', row)
    assert match is not None, f"no boolean icon in the {field} cell"
    return match.group(1) == "True"


def sort_param(html: str, column: str) -> str:
    """The ``o`` value of a changelist column header's sort link."""
    match = re.search(rf'column-{column}">.*?href="\?o=([0-9.-]+)"', html, flags=re.S)
    assert match is not None
    return match.group(1).split(".")[0]


def test_thread_changelist_shows_owner_and_step_count(admin_client_, alice, bob):
    busy, _ = ensure_thread(alice, uuid.uuid4(), name="busy chat")
    quiet, _ = ensure_thread(bob, uuid.uuid4(), name="quiet chat")
    for i in range(3):
        upsert_step(busy.id, uuid.uuid4(), type="user_message", output=f"m{i}")
    # A rewrite of an existing step id must not count twice.
    step = Step.objects.filter(thread=busy).first()
    assert step is not None
    upsert_step(busy.id, step.id, type="user_message", output="rewritten")

    response = admin_client_.get("/admin/threads_app/thread/")

    assert response.status_code == 200
    html = response.content.decode()
    busy_row = row_of(html, "busy chat")
    quiet_row = row_of(html, "quiet chat")
    assert str(busy.pk) in busy_row and str(quiet.pk) in quiet_row
    assert cell(busy_row, "owner") == "alice-owner"
    assert cell(busy_row, "step_count") == "3"
    assert cell(quiet_row, "owner") == "bob-owner"
    assert cell(quiet_row, "step_count") == "0"


def test_thread_changelist_sorts_by_step_count(admin_client_, alice):
    few, _ = ensure_thread(alice, uuid.uuid4(), name="few-steps")
    many, _ = ensure_thread(alice, uuid.uuid4(), name="many-steps")
    upsert_step(few.id, uuid.uuid4(), type="user_message", output="x")
    for _ in range(4):
        upsert_step(many.id, uuid.uuid4(), type="user_message", output="y")

    column = sort_param(admin_client_.get("/admin/threads_app/thread/").content.decode(), "step_count")
    html = admin_client_.get(f"/admin/threads_app/thread/?o=-{column}").content.decode()
    assert html.index("many-steps") < html.index("few-steps")
    html = admin_client_.get(f"/admin/threads_app/thread/?o={column}").content.decode()
    assert html.index("few-steps") < html.index("many-steps")


def test_thread_change_page_lists_its_steps_in_seq_order(admin_client_, alice):
    thread, _ = ensure_thread(alice, uuid.uuid4(), name="ordered")
    other, _ = ensure_thread(alice, uuid.uuid4(), name="elsewhere")
    base = datetime(2024, 1, 1, tzinfo=UTC)
    # Ids and creation times both run opposite to seq, so only seq ordering is right.
    for seq, label in enumerate(["alpha-out", "bravo-out", "charlie-out", "delta-out"], start=1):
        upsert_step(
            thread.id,
            uuid.UUID(int=100 - seq),
            type="user_message" if seq % 2 else "assistant_message",
            output=label,
            created_at=base - timedelta(minutes=seq),
        )
    upsert_step(other.id, uuid.uuid4(), type="user_message", output="foreign-out")

    response = admin_client_.get(f"/admin/threads_app/thread/{thread.pk}/change/")

    assert response.status_code == 200
    html = response.content.decode()
    positions = [html.index(label) for label in ["alpha-out", "bravo-out", "charlie-out", "delta-out"]]
    assert positions == sorted(positions)
    assert "foreign-out" not in html
    assert "alice-owner" in html


def test_thread_search_by_name_and_owner(admin_client_, alice, bob):
    ensure_thread(alice, uuid.uuid4(), name="holiday plans")
    ensure_thread(bob, uuid.uuid4(), name="tax questions")

    html = admin_client_.get("/admin/threads_app/thread/", {"q": "holiday"}).content.decode()
    assert "holiday plans" in html
    assert "tax questions" not in html

    html = admin_client_.get("/admin/threads_app/thread/", {"q": "bob-owner"}).content.decode()
    assert "tax questions" in html
    assert "holiday plans" not in html


def test_step_and_box_and_accepted_message_admin_pages_render(admin_client_, alice):
    thread, _ = ensure_thread(alice, uuid.uuid4(), name="misc")
    step = upsert_step(thread.id, uuid.uuid4(), type="user_message", output="findable-text")

    html = admin_client_.get("/admin/threads_app/step/", {"q": "findable"}).content.decode()
    assert str(step.id) in html
    assert admin_client_.get(f"/admin/threads_app/step/{step.pk}/change/").status_code == 200
    assert admin_client_.get("/admin/threads_app/box/").status_code == 200
    assert admin_client_.get("/admin/threads_app/acceptedmessage/").status_code == 200


def test_session_record_changelist_renders_with_flags(admin_client_, alice, bob):
    live = SocketSession.objects.create(
        id=uuid.uuid4(),
        user=alice,
        thread_id=uuid.uuid4(),
        socket_channel="specific.abc!def",
        chat_started=True,
        has_first_interaction=True,
    )
    dropped = SocketSession.objects.create(
        id=uuid.uuid4(),
        user=bob,
        thread_id=uuid.uuid4(),
        disconnected_at=timezone.now(),
        ended=True,
    )

    response = admin_client_.get("/admin/sessions_app/socketsession/")

    assert response.status_code == 200
    html = response.content.decode()
    assert str(live.pk) in html and str(dropped.pk) in html
    live_row = row_of(html, str(live.pk))
    dropped_row = row_of(html, str(dropped.pk))
    assert cell(live_row, "user") == "alice-owner"
    assert cell(dropped_row, "user") == "bob-owner"
    assert cell(live_row, "thread_id") == str(live.thread_id)
    assert {f: flag(live_row, f) for f in FLAGS} == {
        "is_connected": True,
        "chat_started": True,
        "resumed": False,
        "has_first_interaction": True,
        "ended": False,
    }
    assert {f: flag(dropped_row, f) for f in FLAGS} == {
        "is_connected": False,
        "chat_started": False,
        "resumed": False,
        "has_first_interaction": False,
        "ended": True,
    }

    html = admin_client_.get(
        "/admin/sessions_app/socketsession/", {"chat_started__exact": "1"}
    ).content.decode()
    assert str(live.pk) in html
    assert str(dropped.pk) not in html

    html = admin_client_.get("/admin/sessions_app/socketsession/", {"q": "bob-owner"}).content.decode()
    assert str(dropped.pk) in html
    assert str(live.pk) not in html

    assert admin_client_.get(f"/admin/sessions_app/socketsession/{live.pk}/change/").status_code == 200


def test_admin_requires_staff(client, alice):  # type: ignore[no-untyped-def]
    client.force_login(alice)
    response = client.get("/admin/threads_app/thread/")
    assert response.status_code == 302
    assert "/login/" in response["Location"]
