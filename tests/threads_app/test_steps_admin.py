"""Steps where an operator looks: the step list and a thread's inline show a step's type,
parent, input, output, error and how long it ran."""

import uuid
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from tests.threads_app.test_admin import admin_client_, alice, cell, row_of  # noqa: F401  # fixtures
from threads_app.services import ensure_thread, upsert_step

pytestmark = pytest.mark.django_db


@pytest.fixture
def turn(alice):  # noqa: F811  # the fixture imported above
    thread, _ = ensure_thread(alice, uuid.uuid4(), name="steps in admin")
    question = upsert_step(thread.pk, uuid.uuid4(), type="user_message", output="weather?")
    start = timezone.now()
    tool = upsert_step(
        thread.pk,
        uuid.uuid4(),
        type="tool",
        name="forecast-tool",
        parent_id=question.pk,
        input='{"city": "Lyon"}',
        output="rain-expected",
        start=start,
        end=start + timedelta(milliseconds=1500),
    )
    failed = upsert_step(
        thread.pk,
        uuid.uuid4(),
        type="retrieval",
        name="broken-lookup",
        parent_id=tool.pk,
        output="KeyError: 'x'",
        is_error=True,
        start=start,
        end=None,
    )
    return thread, question, tool, failed


def test_the_step_list_shows_parent_error_and_duration(admin_client_: Client, turn) -> None:  # noqa: F811
    _thread, question, _tool, _failed = turn
    html = admin_client_.get("/admin/threads_app/step/?type=tool").content.decode()
    row = row_of(html, "forecast-tool")
    assert cell(row, "parent_id") == str(question.pk)
    assert cell(row, "duration") == "1.500 s"
    assert "broken-lookup" not in html  # filtered by type
    errors = admin_client_.get("/admin/threads_app/step/?is_error__exact=1").content.decode()
    assert cell(row_of(errors, "broken-lookup"), "duration") == "running"
    assert "forecast-tool" not in errors


def test_a_step_page_and_the_thread_inline_show_input_and_output(admin_client_: Client, turn) -> None:  # noqa: F811
    thread, _question, tool, _failed = turn
    page = admin_client_.get(f"/admin/threads_app/step/{tool.pk}/change/").content.decode()
    assert "{&quot;city&quot;: &quot;Lyon&quot;}" in page and "rain-expected" in page and "1.500 s" in page
    inline = admin_client_.get(f"/admin/threads_app/thread/{thread.pk}/change/").content.decode()
    assert "{&quot;city&quot;: &quot;Lyon&quot;}" in inline and "1.500 s" in inline and "running" in inline
    found = admin_client_.get("/admin/threads_app/step/?q=Lyon").content.decode()
    assert "forecast-tool" in found
