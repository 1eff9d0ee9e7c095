"""The thread list's ``?search=`` over names and message texts (``selectors.search_threads``).

Runs on both databases: PostgreSQL answers by full-text search (and its index), SQLite by
scanning; the cases marked for one of them test what only that one does.
"""

import re
import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from tests.support.search_dataset import RARE_WORD, make_message_set
from threads_app.models import Step, Thread
from threads_app.selectors import SEARCH_MAX_CHARS, matching_messages
from threads_app.services import ensure_thread, upsert_step

pytestmark = pytest.mark.django_db

postgres_only = pytest.mark.skipif(connection.vendor != "postgresql", reason="full-text search")
sqlite_only = pytest.mark.skipif(connection.vendor != "sqlite", reason="the scanning search")


@pytest.fixture
def client(user) -> APIClient:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return api


def chat(owner, name: str, *messages: tuple[str, str]) -> Thread:
    """A thread named ``name`` with steps of (type, output)."""
    thread, _ = ensure_thread(owner, uuid.uuid4(), name=name)
    for type_, output in messages:
        upsert_step(thread.pk, uuid.uuid4(), type=type_, output=output)
    return thread


def user_says(text: str) -> tuple[str, str]:
    return ("user_message", text)


def reply(text: str) -> tuple[str, str]:
    return ("assistant_message", text)


def found(client: APIClient, query: str, **params: int) -> list[str]:
    data: dict[str, str | int] = {"search": query, **params}
    response = client.get("/api/threads/", data)
    assert response.status_code == 200, response.content
    return [t["name"] for t in response.json()["results"]]


def test_a_word_only_in_an_assistant_reply_finds_its_thread(client, user):
    chat(user, "fruit", user_says("tell me about fruit"), reply("The pomegranate is a berry."))
    chat(user, "veg", user_says("and vegetables"), reply("Carrots are roots."))

    assert found(client, "pomegranate") == ["fruit"]
    assert found(client, "POMEGRANATE") == ["fruit"]
    assert found(client, "carrots") == ["veg"]


def test_a_word_only_in_a_user_message_finds_its_thread(client, user):
    chat(user, "a", user_says("my zucchini question"), reply("Echo #1"))
    chat(user, "b", user_says("something else"), reply("Echo #1"))

    assert found(client, "zucchini") == ["a"]


def test_names_still_match_by_substring(client, user):
    chat(user, "apples and pears", reply("nothing here"))
    chat(user, "bananas", reply("nothing here"))

    assert found(client, "pear") == ["apples and pears"]
    assert found(client, "PEARS apples") == ["apples and pears"]


def test_other_steps_than_messages_are_not_searched(client, user):
    chat(user, "tools", ("tool", "quokka output"), ("run", "quokka run"), ("system_message", "quokka"))

    assert found(client, "quokka") == []


def test_other_users_and_deleted_threads_are_never_found(client, user, other_user):
    chat(other_user, "theirs", reply("the wombat reply"))
    gone = chat(user, "gone", reply("the wombat reply"))
    Thread.objects.filter(pk=gone.pk).update(deleted_at=gone.created_at)

    assert found(client, "wombat") == []


def test_every_term_must_be_in_one_message(client, user):
    chat(user, "together", reply("alpha and beta in one line"))
    chat(user, "apart", user_says("alpha first"), reply("then beta"))

    assert found(client, "beta alpha") == ["together"]


def test_a_thread_with_many_matching_messages_is_listed_once_across_pages(client, user):
    for index in range(3):
        chat(user, f"t{index}", *[reply(f"narwhal number {n}") for n in range(4)], user_says("narwhal"))
    chat(user, "other", reply("dolphin"))

    names: list[str] = []
    url: str | None = "/api/threads/"
    params: dict[str, str | int] | None = {"search": "narwhal", "limit": 2}
    while url:
        body = client.get(url, params).json()
        names += [t["name"] for t in body["results"]]
        url, params = body["next"], None
    assert sorted(names) == ["t0", "t1", "t2"]


def test_the_statement_count_does_not_grow_with_the_matches(client, user, django_assert_num_queries):
    chat(user, "first", reply("okapi"), reply("okapi again"))
    response = client.get("/api/threads/", {"search": "okapi"})  # warm: token, session, content type
    assert len(response.json()["results"]) == 1
    # The token's user, the page; on PostgreSQL first the ids of the user's threads.
    with django_assert_num_queries(3 if connection.vendor == "postgresql" else 2) as few:
        client.get("/api/threads/", {"search": "okapi"})
    for index in range(5):
        chat(user, f"more {index}", reply("okapi"), user_says("okapi"))
    with django_assert_num_queries(len(few.captured_queries)):
        assert len(client.get("/api/threads/", {"search": "okapi"}).json()["results"]) == 6


def test_a_search_longer_than_the_bound_is_a_400(client, user):
    chat(user, "x" * 10, reply("y"))

    assert client.get("/api/threads/", {"search": "x" * SEARCH_MAX_CHARS}).status_code == 200
    response = client.get("/api/threads/", {"search": "x" * (SEARCH_MAX_CHARS + 1)})
    assert response.status_code == 400
    assert list(response.json()) == ["search"]


def test_a_blank_search_lists_everything(client, user):
    chat(user, "one", reply("a"))
    chat(user, "two", reply("b"))

    assert sorted(found(client, "   ")) == ["one", "two"]


def test_searches_spend_the_search_budget_and_plain_lists_do_not(client, user, other_user, settings):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"searches": "3/min"}}
    chat(user, "one", reply("an ocelot"))
    assert [client.get("/api/threads/", {"search": "ocelot"}).status_code for _ in range(3)] == [200] * 3
    refused = client.get("/api/threads/", {"search": "ocelot"})
    assert refused.status_code == 429, refused.content
    assert 1 <= int(refused["Retry-After"]) <= 20, refused.headers
    # A plain list, a blank search and one thread read are no searches.
    assert client.get("/api/threads/").status_code == 200
    assert client.get("/api/threads/", {"search": "  "}).status_code == 200
    assert client.get("/api/threads/", {"search": ""}).status_code == 200
    thread_id = Thread.objects.get(name="one").pk
    assert client.get(f"/api/threads/{thread_id}/", {"search": "one"}).status_code == 200
    other = APIClient()
    other.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=other_user).key}")
    assert other.get("/api/threads/", {"search": "ocelot"}).status_code == 200  # per user


def test_a_user_with_more_threads_than_the_statement_lists_is_searched_alike(client, user, monkeypatch):
    from threads_app import selectors

    monkeypatch.setattr(selectors, "SEARCH_LITERAL_THREADS", 2)
    chat(user, "one", reply("a tapir"))
    chat(user, "two", reply("a tapir too"))
    chat(user, "three", reply("a heron"))
    assert sorted(found(client, "tapir")) == ["one", "two"]
    assert found(client, "heron") == ["three"]
    monkeypatch.setattr(selectors, "SEARCH_LITERAL_THREADS", 3)
    assert sorted(found(client, "tapir")) == ["one", "two"]


@postgres_only
def test_postgres_matches_word_forms_phrases_and_exclusions(client, user):
    chat(user, "runner", reply("She was running through the forests."))
    chat(user, "walker", reply("He walks through the forest slowly."))

    assert found(client, "runs") == ["runner"]  # stemmed
    assert sorted(found(client, "forest")) == ["runner", "walker"]
    assert found(client, '"walks through"') == ["walker"]  # a phrase
    assert found(client, "forest -running") == ["walker"]  # an exclusion
    assert sorted(found(client, "running or walks")) == ["runner", "walker"]
    assert found(client, '"unbalanced') == []  # any text is a valid query


@postgres_only
def test_postgres_can_answer_from_the_message_index(user):
    """With plain scans off, only a bitmap scan of ``step_message_search`` (migration 0008)
    avoids a disabled sequential scan; the search's words are looked up in it."""
    chat(user, "indexed", reply("capybara"))
    sql, params = matching_messages("capybara", full_text=True).query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_indexscan = off")
        cursor.execute(f"EXPLAIN {sql}", params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "Bitmap Index Scan on step_message_search" in plan, plan
    assert re.search(r"Index Cond: \(search_document @@", plan), plan


def explain(sql: str) -> str:
    """PostgreSQL's plan of a statement as it was run (its values in it)."""
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {sql}")
        return "\n".join(row[0] for row in cursor.fetchall())


def assert_searched_through_the_index(plan: str) -> None:
    """The documents are looked up in the index only: none is computed again (``to_tsvector``)
    or checked one step at a time (a filter over a thread's steps, a sequential scan)."""
    assert "Bitmap Index Scan on step_message_search" in plan, plan
    assert "Seq Scan on threads_app_step" not in plan, plan
    assert "to_tsvector" not in plan, plan
    assert not re.search(r"Filter: .*search_document", plan), plan


@postgres_only
def test_postgres_searches_a_large_message_set_through_the_index(client, user, other_user):
    """The search planned over 20,000 messages of the caller (10 threads) and 30,000 of
    someone else (3,000 short threads, so the caller's are far longer than the average one),
    ANALYZEd: the caller's matching messages come from a bitmap scan of
    ``step_message_search`` and nothing else reads their documents (before: a filter that
    computed ``to_tsvector`` of every message of each thread, the finding's 4.3 s of CPU at
    105 MB). Both the statement the API ran and the same query planned generically, as a
    prepared statement would be (where the expression index of 0005 no longer matched a
    configuration passed as a parameter: a sequential scan)."""
    make_message_set(user, threads=10, steps_per_thread=2_000)
    make_message_set(other_user, threads=3_000, steps_per_thread=10)
    with CaptureQueriesContext(connection) as ran:
        names = found(client, RARE_WORD, limit=100)
    assert len(names) == 10, names
    [search] = [query["sql"] for query in ran.captured_queries if "search_document" in query["sql"]]
    assert_searched_through_the_index(explain(search))


@sqlite_only
def test_sqlite_matches_parts_of_words_in_messages(client, user):
    chat(user, "scan", reply("The capybaras are resting."))

    assert found(client, "capybara rest") == ["scan"]
    assert Step.objects.count() == 1
