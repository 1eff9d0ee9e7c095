"""The admin's feedback pages: the list loads with its filters (value, date) and its search
(comment), links each feedback to its message, thread and user, and changes nothing."""

import re
import uuid
from datetime import timedelta
from html import unescape
from urllib.parse import urlencode

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from threads_app.feedback import give_feedback
from threads_app.models import Feedback
from threads_app.services import ensure_thread, upsert_step

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/threads_app/feedback/"


@pytest.fixture
def admin_client_(django_user_model) -> Client:
    admin = django_user_model.objects.create_superuser(
        username="boss", email="boss@example.com", password="pw-for-tests-1"
    )
    client = Client()
    client.force_login(admin)
    return client


@pytest.fixture
def rated(user) -> tuple[Feedback, Feedback]:
    thread, _ = ensure_thread(user, uuid.uuid4(), name="Trip planning")
    good, bad = (
        upsert_step(thread.pk, uuid.uuid4(), type="assistant_message", name="assistant", output=text)
        for text in ("Take the train.", "Walk 900 km.")
    )
    up = give_feedback(user, good.pk, value=1, comment="spot on").feedback
    down = give_feedback(user, bad.pk, value=0, comment="absurd distance").feedback
    return up, down


def listed(client: Client, query: str = "") -> str:
    response = client.get(CHANGELIST + query)
    assert response.status_code == 200
    return response.content.decode()


def test_the_list_links_each_feedback_to_its_message_thread_and_user(admin_client_, rated, user):
    up, down = rated
    html = listed(admin_client_)
    assert "spot on" in html and "absurd distance" in html
    assert "thumbs up" in html and "thumbs down" in html
    for feedback in (up, down):
        assert reverse("admin:threads_app_step_change", args=[feedback.step_id]) in html
    assert reverse("admin:threads_app_thread_change", args=[up.thread_id]) in html
    assert reverse("admin:auth_user_change", args=[user.pk]) in html
    assert "Walk 900 km." in html and "Trip planning" in html


def test_the_list_filters_by_value_and_date_and_searches_comments(admin_client_, rated):
    down_only = listed(admin_client_, "?value__exact=0")
    assert "absurd distance" in down_only and "spot on" not in down_only
    up_only = listed(admin_client_, "?value__exact=1")
    assert "spot on" in up_only and "absurd distance" not in up_only

    # The date filter's own links ("Past 7 days"), then a range that holds nothing.
    html = listed(admin_client_)
    assert "By value" in html and "By created at" in html and "By updated at" in html
    past_week = re.search(r'href="(\?created_at__gte=[^"]+)"[^>]*>Past 7 days<', html)
    assert past_week is not None
    this_week = listed(admin_client_, unescape(past_week.group(1)))
    assert "spot on" in this_week and "absurd distance" in this_week
    later = urlencode({"created_at__gte": (timezone.now() + timedelta(days=1)).isoformat()})
    tomorrow = listed(admin_client_, f"?{later}")
    assert "spot on" not in tomorrow and "absurd distance" not in tomorrow

    found = listed(admin_client_, "?q=absurd")
    assert "absurd distance" in found and "spot on" not in found


def test_a_feedback_page_shows_it_read_only_and_none_can_be_added(admin_client_, rated):
    up, _ = rated
    page = admin_client_.get(f"{CHANGELIST}{up.pk}/change/")
    assert page.status_code == 200
    assert "spot on" in page.content.decode()
    assert (
        admin_client_.post(f"{CHANGELIST}{up.pk}/change/", {"value": 0, "comment": "edited"}).status_code
        == 403
    )
    assert admin_client_.get(f"{CHANGELIST}add/").status_code == 403
    assert Feedback.objects.get(pk=up.pk).comment == "spot on"
