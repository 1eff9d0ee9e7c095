"""Steps on the wire (python-socketio client against daphne running ``tests.apps.steps_app``,
whose ``on_message`` runs a tool step with a streamed retrieval step nested inside, then a
failing step, then replies): the events and their StepDicts in order, the rows written (one
per step, not one per token), the history API, ``resume_thread`` and the rebuilt chat
context."""

import uuid
from typing import Any

import aiohttp
import pytest
from asgiref.sync import sync_to_async

from tests.support.client import ChatClient, api_token, signed_in
from threads_app.models import Step

pytestmark = pytest.mark.django_db(transaction=True)

STEP_EVENTS = {"new_message", "update_message", "stream_start", "stream_token", "delete_message"}


@pytest.fixture(scope="module")
def steps_server(server_factory):
    return server_factory.start(CHAT_APP="tests.apps.steps_app")


def step_events(client: ChatClient, ids: set[str]) -> list[tuple[str, Any]]:
    """The step events of ``ids`` as (event, payload), in the order they arrived."""
    return [(name, data) for name, data in client.events if name in STEP_EVENTS and data.get("id") in ids]


@sync_to_async
def rows(thread_id: str) -> list[Step]:
    return list(Step.objects.filter(thread_id=thread_id).order_by("seq"))


async def one_turn(server: Any, user: Any, text: str = "rain") -> tuple[ChatClient, str]:
    client = await signed_in(server, user)
    await client.start()
    await client.wait_event("task_end")
    return client, await one_turn_on(client, text)


async def one_turn_on(client: ChatClient, text: str) -> str:
    """Send ``text`` and wait for the turn to end; returns the thread."""
    ended = len(client.named("task_end"))
    answer = await client.send(text)
    await client.wait_text(f"found 3 for {text}")
    await client.wait_event("task_end", count=ended + 1)
    return str(answer["threadId"])


async def read_history(server: Any, token: str, thread_id: str, *, status: int) -> Any:
    """``GET /api/threads/<id>/history/`` as the token's user; its steps when it is a 200."""
    async with (
        aiohttp.ClientSession(headers={"Authorization": f"Token {token}"}) as http,
        http.get(f"{server.url}/api/threads/{thread_id}/history/") as response,
    ):
        assert response.status == status
        return (await response.json())["results"] if status == 200 else None


def by_name(steps: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in steps if s["type"] not in ("user_message", "assistant_message")}


async def test_a_turns_steps_go_out_nested_streamed_and_finished_in_order(steps_server, make_user):
    client, thread_id = await one_turn(steps_server, make_user())
    [user_step] = [d for n, d in client.events if n == "new_message" and d["type"] == "user_message"]
    opened = {d["name"]: d for n, d in client.events if n == "new_message" and d["type"] != "user_message"}
    search, fetch, calculator = opened["search"], opened["fetch"], opened["calculator"]
    ids = {search["id"], fetch["id"], calculator["id"]}
    events = [(name, data.get("name") or data.get("token")) for name, data in step_events(client, ids)]
    assert events == [
        ("new_message", "search"),
        ("new_message", "fetch"),
        ("stream_start", "fetch"),
        ("stream_token", "second "),
        ("stream_token", "third"),
        ("update_message", "fetch"),
        ("update_message", "search"),
        ("new_message", "calculator"),
        ("update_message", "calculator"),
    ]
    # Opened: running (no end), nested, with the input the call was given.
    assert search["type"] == "tool" and search["parentId"] == user_step["id"]
    assert search["end"] is None and search["start"] and search["isError"] is False
    assert '"query": "rain"' in search["input"] and '"limit": 3' in search["input"]
    assert search["showInput"] == "json"
    assert fetch["type"] == "retrieval" and fetch["parentId"] == search["id"]
    assert calculator["parentId"] == user_step["id"]
    # The stream starts with the first token; the finished step carries all of them.
    stream_start = next(d for n, d in step_events(client, {fetch["id"]}) if n == "stream_start")
    assert stream_start["output"] == "first " and stream_start["streaming"] is True
    finished = {d["name"]: d for n, d in client.events if n == "update_message" and d["id"] in ids}
    assert finished["fetch"]["output"] == "first second third" and finished["fetch"]["streaming"] is False
    assert finished["fetch"]["input"].startswith("{") and "example.invalid" in finished["fetch"]["input"]
    assert finished["search"]["output"] == '{\n  "query": "rain",\n  "hits": 3\n}'
    assert finished["search"]["language"] == "json"
    assert finished["search"]["start"] <= finished["fetch"]["start"] <= finished["fetch"]["end"]
    assert finished["fetch"]["end"] <= finished["search"]["end"]
    assert finished["calculator"]["isError"] is True
    assert finished["calculator"]["output"] == "ZeroDivisionError: division by zero"
    assert '"a": 1' in finished["calculator"]["input"]
    # The steps come before the reply and after the question, in the transcript too.
    seqs = [
        user_step["seq"],
        finished["search"]["seq"],
        finished["fetch"]["seq"],
        finished["calculator"]["seq"],
    ]
    assert seqs == sorted(seqs) and len(set(seqs)) == 4
    await client.disconnect()

    # One row per step, whatever was streamed, with input, output, parent, error and timing.
    written = {row.name: row for row in await rows(thread_id) if row.type not in ("user_message",)}
    assert [row.type for row in await rows(thread_id)] == [
        "user_message",
        "tool",
        "retrieval",
        "tool",
        "assistant_message",
    ]
    assert written["fetch"].output == "first second third"
    assert written["fetch"].parent_id == uuid.UUID(search["id"])
    # Stored under the user step's own id (the send's key); shown live under the client's.
    [question] = [row for row in await rows(thread_id) if row.type == "user_message"]
    assert question.metadata["acceptedIds"] == [user_step["id"]]
    assert written["search"].parent_id == question.id
    assert '"limit": 3' in written["search"].input
    assert written["calculator"].is_error
    assert all(row.start and row.end and row.start <= row.end for row in written.values())


async def test_the_history_api_and_resume_thread_carry_the_steps_and_the_context_is_rebuilt(
    steps_server, make_user
):
    user = make_user()
    client, thread_id = await one_turn(steps_server, user)
    live = {d["id"]: d for n, d in client.events if n == "update_message"}
    await client.disconnect()

    history = await read_history(steps_server, await api_token(user), thread_id, status=200)
    steps = by_name(history)
    assert set(steps) == {"search", "fetch", "calculator"}
    [question] = [s for s in history if s["type"] == "user_message"]
    # Live, a step nested in the user message names it by its client's id; read, by its own.
    shown_as = {question["id"]: question["metadata"]["acceptedIds"][0]}
    for name, step in steps.items():
        sent = live[step["id"]]
        assert shown_as.get(step["parentId"], step["parentId"]) == sent["parentId"], name
        for key in (
            "type",
            "input",
            "output",
            "isError",
            "start",
            "end",
            "showInput",
            "language",
        ):
            assert step[key] == sent[key], (name, key)
    assert steps["fetch"]["parentId"] == steps["search"]["id"]

    # Another user reading it: 404, nothing about the steps.
    await read_history(steps_server, await api_token(make_user()), thread_id, status=404)

    resumed = ChatClient(steps_server.url, client.cookie)
    await resumed.start(thread_id=thread_id)
    await resumed.wait_text(
        "context: user_message,tool,retrieval,tool,assistant_message | openai: user,assistant"
    )
    [thread] = resumed.named("resume_thread")
    again = by_name(thread["steps"])
    assert again["fetch"]["output"] == "first second third"
    assert again["fetch"]["parentId"] == again["search"]["id"]
    assert again["calculator"]["isError"] is True and again["search"]["input"] == steps["search"]["input"]
    assert again["search"]["end"] == steps["search"]["end"]
    await resumed.disconnect()


async def test_a_stop_keeps_the_open_step_as_far_as_it_got_marked_stopped(steps_server, make_user):
    client = await signed_in(steps_server, make_user())
    await client.start()
    await client.wait_event("task_end")
    thread_id = str((await client.send("wait"))["threadId"])
    await client.wait_event("stream_start")
    await client.emit("stop")
    await client.wait_event("task_end", count=2)
    [kept] = [d for n, d in client.events if n == "update_message" and d["name"] == "sleeper"]
    assert kept["output"] == "started" and kept["metadata"]["interrupted"] is True
    assert kept["end"] is not None and kept["streaming"] is False and kept["isError"] is False
    [row] = [row for row in await rows(thread_id) if row.name == "sleeper"]
    assert row.output == "started" and row.metadata["interrupted"] is True and row.end is not None
    await client.disconnect()


@pytest.fixture(scope="module")
def warm_up_server(server_factory):
    """The same app, with a step in ``on_chat_start``."""
    return server_factory.start(CHAT_APP="tests.apps.steps_app", STEPS_APP_WARMUP="1")


async def test_a_step_sent_before_the_thread_exists_is_written_whole_with_the_first_message(
    warm_up_server, make_user
):
    client = await signed_in(warm_up_server, make_user())
    await client.start()
    await client.wait_event("task_end", count=2)  # connected, then on_chat_start ran
    [opened] = [d for n, d in client.events if n == "new_message" and d["name"] == "warm-up"]
    assert opened["parentId"] is None and opened["end"] is None
    assert opened["seq"] is None  # the thread does not exist yet: the step waits for it
    thread_id = await one_turn_on(client, "snow")
    [row] = [row for row in await rows(thread_id) if row.name == "warm-up"]
    assert row.type == "run" and row.input == '{\n  "ready": true\n}' and row.output == "warm"
    assert row.start and row.end and row.metadata["showInput"] == "json"
    await client.disconnect()


async def test_an_edited_message_drops_the_old_steps_and_its_new_ones_nest_under_it(steps_server, make_user):
    client, thread_id = await one_turn(steps_server, make_user())
    [question] = [d for n, d in client.events if n == "new_message" and d["type"] == "user_message"]
    old = {d["id"] for n, d in client.events if n == "new_message" and d["type"] == "tool"}
    client.events.clear()
    await client.call("edit_message", {"message": {"id": question["id"], "output": "hail"}})
    await client.wait_text("found 3 for hail")
    assert old <= {d["id"] for d in client.named("delete_message")}
    [search] = [d for n, d in client.events if n == "new_message" and d["name"] == "search"]
    assert search["parentId"] == question["id"] and '"query": "hail"' in search["input"]
    names = [
        row.name for row in await rows(thread_id) if row.type not in ("user_message", "assistant_message")
    ]
    assert names == ["search", "fetch", "calculator"]  # the old turn's steps are gone
    await client.disconnect()
