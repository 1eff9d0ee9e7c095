"""The admin pages used to inspect conversations and session records."""

import json
import re
import uuid
from datetime import UTC, datetime, timedelta
from html import unescape
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from sessions_app.models import SocketSession
from sessions_app.runtime.engines import ENGINES
from threads_app.models import AcceptedMessage, Box, Step, Thread
from threads_app.services import default_box_for, ensure_thread, upsert_step

pytestmark = pytest.mark.django_db

FLAGS = ("is_connected", "chat_started", "resumed", "has_first_interaction", "ended")


@pytest.fixture
def admin_client_(django_user_model) -> Client:
    admin = django_user_model.objects.create_superuser(
        username="boss", email="boss@example.com", password="pw-for-tests-1"
    )
    client = Client()
    client.force_login(admin)
    return client


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user(username="alice-owner", password="pw-for-tests-1")


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user(username="bob-owner", password="pw-for-tests-1")


def row_of(html: str, text: str) -> str:
    """The changelist row (``<tr>...</tr>``) that mentions ``text``."""
    rows: list[str] = [row for row in re.findall(r"<tr>.*?</tr>", html, flags=re.S) if text in row]
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


def test_admin_requires_staff(client, alice):
    client.force_login(alice)
    response = client.get("/admin/threads_app/thread/")
    assert response.status_code == 302
    assert "/login/" in response["Location"]


# --- boxes: engine choice and options, read-only runtime fields, the webhook secret ----------------


def box_form(box: Box, **changes: Any) -> dict[str, Any]:
    """The box change form's fields as the admin page posts them."""
    data = {
        "owner": box.owner_id,
        "name": box.name,
        "engine": box.engine,
        "engine_options": json.dumps(box.engine_options),
        "webhook_url": box.webhook_url,
        "_save": "Save",
    }
    for key, value in changes.items():
        data[key] = json.dumps(value) if key == "engine_options" else value
    return data


def change_url(box: Box) -> str:
    return f"/admin/threads_app/box/{box.pk}/change/"


def test_box_engine_is_a_choice_of_the_registered_engines(admin_client_, alice):
    box = default_box_for(alice)
    html = admin_client_.get(change_url(box)).content.decode()
    select = re.search(r'<select name="engine".*?</select>', html, flags=re.S)
    assert select is not None
    assert re.findall(r'<option value="([^"]*)"', select.group(0)) == list(ENGINES)

    response = admin_client_.post(change_url(box), box_form(box, engine="opneai"))

    assert response.status_code == 200
    assert "Select a valid choice" in response.content.decode()
    box.refresh_from_db()
    assert box.engine == "echo"


@pytest.mark.parametrize(
    ("engine", "options", "error"),
    [
        ("openai", {"base_url": "not a url", "model": "m"}, "base_url: must be an http(s) URL"),
        ("openai", {"base_url": "http://127.0.0.1:8080/v1"}, "model: required"),
        ("openai", {"model": "m", "temperature": "hot"}, "temperature: must be a number"),
        ("openai", {"model": "m", "api_key": 42}, "api_key: must be a string"),
        ("openai", {"model": "m", "modle": "x"}, "modle: unknown option"),
        ("echo", {"slow": "fast"}, "slow: must be a number"),
        ("echo", {"slow": -1}, "slow: must be at least 0"),
        ("claude", {"permission_mode": "yolo"}, "permission_mode: must be one of"),
        ("claude", {"sdk_options": {"resume": "abc"}}, "sdk_options: may not set resume"),
        ("claude", {"sdk_options": {"model": "x"}}, "sdk_options: may not set model"),
        ("claude", {"sdk_options": {"max_turnz": 3}}, "sdk_options: unknown ClaudeAgentOptions field"),
        ("echo", ["slow"], "must be a JSON object"),
    ],
)
def test_bad_engine_options_are_a_form_error_naming_the_key(admin_client_, alice, engine, options, error):
    box = default_box_for(alice)

    response = admin_client_.post(change_url(box), box_form(box, engine=engine, engine_options=options))

    assert response.status_code == 200
    assert error in unescape(response.content.decode())
    box.refresh_from_db()
    assert (box.engine, box.engine_options) == ("echo", {})


def test_valid_engine_options_are_saved(admin_client_, alice):
    box = default_box_for(alice)
    options = {"base_url": "http://vllm:8000/v1", "model": "llama", "temperature": 0.2, "max_retries": 0}

    response = admin_client_.post(change_url(box), box_form(box, engine="openai", engine_options=options))

    assert response.status_code == 302
    box.refresh_from_db()
    assert (box.engine, box.engine_options) == ("openai", options)
    # An empty options field means no options.
    response = admin_client_.post(change_url(box), {**box_form(box, engine="echo"), "engine_options": ""})
    assert response.status_code == 302
    box.refresh_from_db()
    assert (box.engine, box.engine_options) == ("echo", {})


def test_changing_the_engine_forgets_the_threads_engine_conversations(admin_client_, alice):
    box = default_box_for(alice)
    thread, _ = ensure_thread(alice, uuid.uuid4(), name="resumable")
    Thread.objects.filter(pk=thread.pk).update(engine_session_id="echo-conversation")

    admin_client_.post(change_url(box), box_form(box, engine_options={"slow": 0.01}))
    thread.refresh_from_db()
    assert thread.engine_session_id == "echo-conversation"  # same engine: the conversation goes on

    admin_client_.post(change_url(box), box_form(box, engine="openai", engine_options={"model": "m"}))
    thread.refresh_from_db()
    assert thread.engine_session_id == ""  # openai cannot resume the echo engine's conversation


def test_box_runtime_fields_are_read_only_and_the_secret_never_shown(admin_client_, alice):
    box = default_box_for(alice)
    Box.objects.filter(pk=box.pk).update(runtime_owner="specific.owner!1")
    box.refresh_from_db()
    secret = box.webhook_secret
    assert secret

    for url in (change_url(box), "/admin/threads_app/box/"):
        html = admin_client_.get(url).content.decode()
        assert secret not in html
        assert 'name="webhook_secret"' not in html
        assert 'name="runtime_owner"' not in html and 'name="runtime_heartbeat"' not in html
    assert "specific.owner!1" in admin_client_.get(change_url(box)).content.decode()  # shown, not editable

    response = admin_client_.post(
        change_url(box),
        {**box_form(box), "runtime_owner": "", "webhook_secret": "chosen", "id": str(uuid.uuid4())},
    )

    assert response.status_code == 302
    box.refresh_from_db()
    assert (box.runtime_owner, box.webhook_secret) == ("specific.owner!1", secret)


def test_rotating_the_webhook_secret_shows_the_new_one_once(admin_client_, alice, bob):
    boxes = [default_box_for(alice), default_box_for(bob)]
    old = {box.pk: box.webhook_secret for box in boxes}

    response = admin_client_.post(
        "/admin/threads_app/box/",
        {"action": "rotate_webhook_secret", "_selected_action": [str(boxes[0].pk)]},
    )

    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    shown = re.findall(r'<code class="webhook-secret">([0-9a-f]+)</code>', response.content.decode())
    rotated, untouched = Box.objects.get(pk=boxes[0].pk), Box.objects.get(pk=boxes[1].pk)
    assert shown == [rotated.webhook_secret]
    assert rotated.webhook_secret != old[rotated.pk]
    assert untouched.webhook_secret == old[untouched.pk]
    # Once: no later page carries it.
    for url in ("/admin/threads_app/box/", change_url(rotated)):
        assert rotated.webhook_secret not in admin_client_.get(url).content.decode()


def test_thread_and_step_runtime_fields_are_read_only(admin_client_, alice):
    thread, _ = ensure_thread(alice, uuid.uuid4(), name="kept")
    step = upsert_step(thread.id, uuid.uuid4(), type="user_message", output="hi")
    Thread.objects.filter(pk=thread.pk).update(engine_session_id="conv-1")
    thread.refresh_from_db()

    html = admin_client_.get(f"/admin/threads_app/thread/{thread.pk}/change/").content.decode()
    for field in ("engine_session_id", "last_seq", "box", "owner"):
        assert f'name="{field}"' not in html
    response = admin_client_.post(
        f"/admin/threads_app/thread/{thread.pk}/change/",
        {
            "name": "renamed",
            "metadata": "{}",
            "chat_profile": "",
            "chat_settings": "{}",
            "engine_session_id": "forged",
            "last_seq": "999",
            "steps-TOTAL_FORMS": "1",
            "steps-INITIAL_FORMS": "1",
            "steps-0-id": str(step.pk),
            "steps-0-thread": str(thread.pk),
            "_save": "Save",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    thread.refresh_from_db()
    assert (thread.name, thread.engine_session_id, thread.last_seq) == ("renamed", "conv-1", 1)

    html = admin_client_.get(f"/admin/threads_app/step/{step.pk}/change/").content.decode()
    for field in ("seq", "thread", "parent_id", "created_at"):
        assert f'name="{field}"' not in html


@pytest.mark.parametrize("kind", ["sessions_app/socketsession", "threads_app/acceptedmessage"])
def test_runtime_records_are_view_only(admin_client_, alice, kind):
    thread, _ = ensure_thread(alice, uuid.uuid4(), name="records")
    if kind.endswith("socketsession"):
        record: Any = SocketSession.objects.create(id=uuid.uuid4(), user=alice, thread_id=thread.pk)
    else:
        record = AcceptedMessage.objects.create(
            id=uuid.uuid4(),
            client_id=uuid.uuid4(),
            thread=thread,
            box=thread.box,
            author=alice,
            text="queued",
        )
    url = f"/admin/{kind}/{record.pk}/change/"

    response = admin_client_.get(url)
    assert response.status_code == 200
    assert "<input" not in re.sub(
        r'<input type="hidden"[^>]*>|<input[^>]*name="q"[^>]*>',
        "",
        response.content.decode().split('id="content-main"')[1],
    )
    assert admin_client_.post(url, {"ended": "on", "state": "failed"}).status_code == 403
    assert admin_client_.get(f"/admin/{kind}/add/").status_code == 403


def test_thread_change_page_shows_the_chat_settings_panel_with_its_values(admin_client_, alice):
    thread, _ = ensure_thread(alice, uuid.uuid4(), name="tuned")
    inputs = [
        {"type": "select", "id": "model", "label": "Model <b>", "initial": "small", "items": []},
        {"type": "slider", "id": "temperature", "label": "Temperature", "initial": 0.5},
    ]
    Thread.objects.filter(pk=thread.pk).update(
        metadata={"chat_settings_inputs": inputs}, chat_settings={"model": "large", "temperature": 0.8}
    )
    html = admin_client_.get(f"/admin/threads_app/thread/{thread.pk}/change/").content.decode()
    assert "chat settings panel" in html.lower()
    assert "Model &lt;b&gt;" in html  # labels are escaped
    assert "<code>temperature</code></td><td>0.8</td>" in html
    assert "&quot;large&quot;" in html

    bare, _ = ensure_thread(alice, uuid.uuid4(), name="plain")
    html = admin_client_.get(f"/admin/threads_app/thread/{bare.pk}/change/").content.decode()
    assert "(the app declared no settings)" in html
