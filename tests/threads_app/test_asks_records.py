"""The ask records: an answer is claimed once (a second answer, a timeout after it, another
user's and a late one all lose), the open asks a thread shows, and the admin's read-only pages."""

import uuid
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from sessions_app.asks import accepts
from threads_app import asks
from threads_app.models import Ask

pytestmark = pytest.mark.django_db


def new_ask(user, *, seconds: float = 60, thread_id: uuid.UUID | None = None) -> Ask:
    return asks.open_ask(
        user=user,
        thread_id=thread_id or uuid.uuid4(),
        session_id=uuid.uuid4(),
        step_id=uuid.uuid4(),
        kind=Ask.Kind.TEXT,
        spec={},
        message={"output": "Your name?"},
        deadline=timezone.now() + timedelta(seconds=seconds),
    )


def test_an_answer_is_claimed_once_and_then_nothing_else_closes_the_ask(user, django_user_model) -> None:
    ask = new_ask(user)
    other = django_user_model.objects.create_user(username="other", password="pw-for-tests-2")
    assert not asks.claim_answer(ask.pk, other, {"output": "not mine"})
    assert asks.claim_answer(ask.pk, user, {"output": "Ada"})
    assert not asks.claim_answer(ask.pk, user, {"output": "Eve"})
    assert not asks.close_ask(ask.pk, Ask.State.TIMED_OUT)
    ask.refresh_from_db()
    assert (ask.state, ask.answer) == (Ask.State.ANSWERED, {"output": "Ada"})
    assert asks.find_open_ask(user, ask_id=ask.pk) is None


def test_an_ask_past_its_deadline_takes_no_answer_and_is_not_shown(user) -> None:
    thread_id = uuid.uuid4()
    late = new_ask(user, seconds=-1, thread_id=thread_id)
    waiting = new_ask(user, thread_id=thread_id)
    assert not asks.claim_answer(late.pk, user, {"output": "late"})
    assert [e["spec"]["askId"] for e in asks.thread_ask_events(user.pk, thread_id)] == [str(waiting.pk)]
    event = asks.thread_ask_events(user.pk, thread_id)[0]
    assert event["msg"] == {"output": "Your name?"} and 55 <= event["spec"]["timeout"] <= 60


def test_a_sessions_end_cancels_its_open_asks_only(user) -> None:
    ask = new_ask(user)
    answered = asks.open_ask(
        user=user,
        thread_id=ask.thread_id,
        session_id=ask.session_id,
        step_id=uuid.uuid4(),
        kind=Ask.Kind.TEXT,
        spec={},
        message={},
        deadline=ask.deadline,
    )
    asks.claim_answer(answered.pk, user, {"output": "x"})
    assert [a.pk for a in asks.close_session_asks(ask.session_id)] == [ask.pk]
    ask.refresh_from_db()
    answered.refresh_from_db()
    assert (ask.state, answered.state) == (Ask.State.CANCELLED, Ask.State.ANSWERED)


@pytest.mark.parametrize(
    ("accept", "content_type", "name", "taken"),
    [
        (["image/png"], "image/png", "a.png", True),
        (["image/png"], "image/jpeg", "a.png", False),
        (["image/*"], "image/webp", "a.webp", True),
        (["text/plain"], "image/png", "a.txt", False),
        ({"text/plain": [".txt", ".py"]}, "text/x-python", "a.py", True),
        ({"text/plain": [".txt"]}, "application/pdf", "a.pdf", False),
        ([], "application/pdf", "a.pdf", True),
    ],
)
def test_accept_matches_the_upload_records_type(accept, content_type, name, taken) -> None:
    assert accepts(accept, content_type, name) is taken


def test_the_admin_lists_asks_and_changes_nothing(user, django_user_model) -> None:
    ask = new_ask(user)
    admin = django_user_model.objects.create_superuser(
        username="boss", email="b@example.com", password="pw-1-x"
    )
    client = Client()
    client.force_login(admin)
    listing = client.get("/admin/threads_app/ask/?state__exact=open&kind__exact=text")
    assert listing.status_code == 200 and "Your name?" in listing.content.decode()
    assert client.get(f"/admin/threads_app/ask/{ask.pk}/change/").status_code == 200
    assert client.post(f"/admin/threads_app/ask/{ask.pk}/change/", {"state": "answered"}).status_code == 403
    ask.refresh_from_db()
    assert ask.state == Ask.State.OPEN


def test_purge_asks_deletes_only_asks_long_past_their_deadline(user) -> None:
    from io import StringIO

    from django.core.management import call_command

    old = new_ask(user, seconds=-8 * 24 * 3600)
    recent = new_ask(user, seconds=-3600)
    waiting = new_ask(user)
    out = StringIO()
    call_command("purge_asks", stdout=out)
    assert "deleted 1 ask(s)" in out.getvalue()
    assert set(Ask.objects.values_list("pk", flat=True)) == {recent.pk, waiting.pk}
    assert not Ask.objects.filter(pk=old.pk).exists()
