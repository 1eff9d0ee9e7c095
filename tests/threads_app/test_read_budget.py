"""The per-user read budget: reads are granted what they want while the user's bucket holds
it, shrink to the floor (still the newest steps, and a cursor to the rest) once it is spent,
give back what they did not carry, and never touch another user's bucket."""

import uuid

import pytest

from threads_app.read_budget import read_budget
from threads_app.selectors import OMITTED_KEY, bootstrap, resume_thread_dict
from threads_app.services import ensure_thread, upsert_step

pytestmark = pytest.mark.django_db


@pytest.fixture
def budgets(settings):
    """Small budgets, in the configured store (Redis when the run has it): the Lua script and
    the in-process bucket must grant alike."""
    settings.TRANSCRIPT_READ_BURST_BYTES = 100_000
    settings.TRANSCRIPT_READ_BYTES_PER_SECOND = 1  # no refill to speak of during a test
    settings.TRANSCRIPT_READ_FLOOR_BYTES = 5_000
    settings.READ_PAGE_MAX_BYTES = 60_000
    return settings


def test_grants_shrink_to_the_floor_and_refunds_come_back(budgets):
    assert read_budget.grant(1, 60_000) == 60_000
    assert read_budget.grant(1, 60_000) == 40_000  # what is left
    assert read_budget.grant(1, 60_000) == 5_000  # the floor, into debt
    assert read_budget.grant(2, 60_000) == 60_000  # someone else's bucket is full
    read_budget.refund(1, 50_000)
    assert read_budget.grant(1, 60_000) == 45_000


@pytest.fixture
def budgets_here(budgets):
    """The same budgets in this process's bucket: the reads below are judged by what they
    were granted, which a Redis that answers late (a loaded machine; the grant then lets the
    read through, as it must) would make a matter of timing."""
    budgets.REDIS_URL = ""
    return budgets


def test_a_read_takes_only_what_it_carried(budgets_here, user):
    thread, _ = ensure_thread(user, uuid.uuid4(), name="small")
    upsert_step(thread.pk, uuid.uuid4(), type="user_message", output="hi")
    for _ in range(20):
        assert [s["output"] for s in bootstrap(thread)["entries"]] == ["hi"]
    assert read_budget.grant(user.pk, 60_000) == 60_000  # 20 small reads cost next to nothing


def test_a_spent_budget_still_shows_the_newest_steps_and_where_they_start(budgets_here, user, other_user):
    thread, _ = ensure_thread(user, uuid.uuid4(), name="big")
    for i in range(40):
        upsert_step(thread.pk, uuid.uuid4(), type="assistant_message", output=f"{i} " + "x" * 2_000)
    first = bootstrap(thread)
    assert len(first["entries"]) > 20
    for _ in range(3):
        bootstrap(thread)
    spent = bootstrap(thread)
    assert 0 < len(spent["entries"]) <= 3  # the floor: 5 KB
    assert spent["entries"][-1]["seq"] == 40 and spent[OMITTED_KEY] == spent["entries"][0]["seq"]
    resumed = resume_thread_dict(user, thread.pk)
    assert resumed is not None and 0 < len(resumed["steps"]) <= 3
    own, _ = ensure_thread(other_user, uuid.uuid4(), name="theirs")
    for i in range(40):
        upsert_step(own.pk, uuid.uuid4(), type="assistant_message", output=f"{i} " + "x" * 2_000)
    assert len(bootstrap(own)["entries"]) > 20  # their reads are not the first user's
