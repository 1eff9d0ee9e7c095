"""``chat.LangchainCallbackHandler`` / ``chat.AsyncLangchainCallbackHandler`` on the wire: a
daphne running ``tests.apps.langchain_app`` (a real langchain_core chain: a RunnableLambda
calling a ``@tool`` and a retriever, a prompt, langchain_core's own fake chat model, a parser,
inside a ``@chat.step``) and a python-socketio client. What the client is sent and what is
written: one step per shown run, with its type, parent, input and output; the model's tokens
streamed into its step and the final answer into a message, token by token."""

import asyncio
import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from tests.support.client import ChatClient, signed_in
from tests.support.waiting import wait_until
from threads_app.models import Step

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]
STEP_TYPES = {"run", "tool", "llm", "retrieval", "undefined"}


@pytest.fixture(scope="module")
def langchain_server(server_factory: Any) -> Any:
    return server_factory.start(CHAT_APP="tests.apps.langchain_app")


@sync_to_async
def rows(thread_id: str) -> list[Step]:
    return list(Step.objects.filter(thread_id=thread_id).order_by("seq"))


async def turn(server: Any, user: Any, text: str, reply: str) -> tuple[ChatClient, str]:
    """Send ``text`` in a new chat and wait for ``reply`` and the turn's end."""
    client = await signed_in(server, user)
    await client.start()
    await client.wait_event("task_end")  # the chat's start
    ended = len(client.named("task_end"))
    answer = await client.send(text)
    try:
        await client.wait_text(reply, timeout=30)
        await client.wait_event("task_end", count=ended + 1, timeout=30)
    except TimeoutError:
        pytest.fail(f"never shown {reply!r}; events: {client.events!r}")
    return client, str(answer["threadId"])


def finished_steps(client: ChatClient) -> dict[str, dict[str, Any]]:
    """The last StepDict of every step (not message) the client was sent, by name."""
    last: dict[str, dict[str, Any]] = {}
    for name, data in client.events:
        if name in ("new_message", "update_message") and data.get("type") in STEP_TYPES:
            last[data["name"]] = data
    return last


def answer_stream(client: ChatClient) -> dict[str, Any]:
    """The ``stream_start`` of the one message streamed in the turn (the final answer)."""
    started = [d for n, d in client.events if n == "stream_start" and d["type"] == "assistant_message"]
    assert len(started) == 1, client.events
    first: dict[str, Any] = started[0]
    return first


async def check_the_chain_steps(client: ChatClient, thread_id: str, mode: str) -> None:
    """The steps of one ``async``/``sync`` turn on Paris, live and as written."""
    [question] = [d for n, d in client.events if n == "new_message" and d["type"] == "user_message"]
    steps = finished_steps(client)
    # Glue runs (the sequence, the prompt, the parser) are not shown.
    assert set(steps) == {"answer", "gather", "weather", "Notes", "GenericFakeChatModel"}, steps
    answer, gather = steps["answer"], steps["gather"]
    tool, notes, model = steps["weather"], steps["Notes"], steps["GenericFakeChatModel"]
    assert [answer["type"], gather["type"], tool["type"], notes["type"], model["type"]] == [
        "run",
        "run",
        "tool",
        "retrieval",
        "llm",
    ], steps
    # Nesting: the chain's outermost runs under the @chat.step it ran in; the tool and the
    # retriever under the lambda that called them.
    assert answer["parentId"] == question["id"]
    assert gather["parentId"] == answer["id"] and model["parentId"] == answer["id"], steps
    assert tool["parentId"] == gather["id"] and notes["parentId"] == gather["id"], steps
    # Inputs and outputs.
    assert gather["input"] == "Paris" and json.loads(gather["output"]) == {
        "city": "Paris",
        "weather": "sunny in Paris",
        "notes": "Paris has a river",
    }, gather
    assert json.loads(tool["input"]) == {"city": "Paris"} and tool["output"] == "sunny in Paris", tool
    assert notes["input"] == "Paris", notes
    assert json.loads(notes["output"]) == [
        {"page_content": "Paris has a river", "metadata": {"source": "atlas"}}
    ]
    assert json.loads(model["input"]) == [
        {"role": "system", "content": "Answer from the facts."},
        {"role": "human", "content": "Paris: sunny in Paris; Paris has a river"},
    ], model
    assert model["output"] == "Final Answer: sunny in Paris" and model["isError"] is False, model
    assert all(s["start"] and s["end"] and s["start"] <= s["end"] for s in steps.values()), steps
    # The model's tokens were streamed into its step, word by word.
    model_tokens = [d["token"] for n, d in client.events if n == "stream_token" and d["id"] == model["id"]]
    assert "".join(model_tokens) == " Answer: sunny in Paris" and len(model_tokens) >= 5, model_tokens
    # The final answer (after "Final Answer:") streamed into a message of its own, token by token.
    final_start = answer_stream(client)
    final_tokens = [
        d["token"] for n, d in client.events if n == "stream_token" and d["id"] == final_start["id"]
    ]
    assert final_start["output"] == "", final_start
    assert final_tokens == ["sunny", " ", "in", " ", "Paris"], final_tokens
    # Written once per step, with the same parents, then the streamed answer, then "done".
    written = await rows(thread_id)
    by_name = {row.name: row for row in written}
    assert by_name["weather"].parent_id == by_name["gather"].id
    assert by_name["GenericFakeChatModel"].output == "Final Answer: sunny in Paris"
    assert [row.type for row in written] == [
        "user_message",
        "run",
        "run",
        "retrieval",
        "tool",
        "llm",
        "assistant_message",
        "assistant_message",
    ], [(row.type, row.name) for row in written]
    assert [row.output for row in written if row.type == "assistant_message"] == [
        "sunny in Paris",
        f"done {mode}",
    ]


async def test_the_async_handler_records_an_astream_as_nested_steps_and_streams_the_answer(
    langchain_server, make_user
):
    client, thread_id = await turn(langchain_server, make_user(), "async Paris", "done async")
    await check_the_chain_steps(client, thread_id, "async")
    await client.disconnect()


async def test_the_sync_handler_records_a_stream_run_on_an_app_thread_the_same_way(
    langchain_server, make_user
):
    client, thread_id = await turn(langchain_server, make_user(), "sync Paris", "done sync")
    await check_the_chain_steps(client, thread_id, "sync")
    await client.disconnect()


async def test_a_failing_tool_is_an_error_step_and_the_runs_around_it_fail_with_it(
    langchain_server, make_user
):
    client, thread_id = await turn(
        langchain_server, make_user(), "fail Atlantis", "failed: no weather under the sea"
    )
    steps = finished_steps(client)
    assert set(steps) == {"gather", "weather", "Notes"}, steps  # the model never ran
    assert steps["weather"]["isError"] is True, steps["weather"]
    assert steps["weather"]["output"] == "ValueError: no weather under the sea", steps["weather"]
    assert steps["gather"]["isError"] is True and steps["Notes"]["isError"] is False, steps
    [question] = [d for n, d in client.events if n == "new_message" and d["type"] == "user_message"]
    assert steps["gather"]["parentId"] == question["id"], steps  # no step was open: the message
    written = {row.name: row for row in await rows(thread_id)}
    assert written["weather"].is_error and written["weather"].end is not None
    await client.disconnect()


def python(code: str) -> subprocess.CompletedProcess[str]:
    """``code`` run by a new interpreter with the project's settings (a fresh ``sys.modules``)."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "chatproject.settings"}
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=60,
        check=False,
    )


def test_the_server_and_the_chat_api_start_without_importing_langchain() -> None:
    loaded = python(
        "import sys, django; django.setup(); import chatproject.asgi, sessions_app.chat;"
        "print(sorted(m for m in sys.modules if m.startswith(('langchain', 'langsmith'))))"
    )
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.strip() == "[]", loaded.stdout


def test_using_the_handler_without_langchain_core_names_the_package() -> None:
    refused = python(
        "import sys, django; django.setup(); sys.modules['langchain_core'] = None;"
        "from sessions_app import chat; chat.LangchainCallbackHandler"
    )
    assert refused.returncode == 1, (refused.stdout, refused.stderr)
    assert (
        "ImportError: chat.LangchainCallbackHandler needs the optional package langchain-core"
        in refused.stderr
    )


async def test_a_sync_invoke_on_the_event_loop_answers_and_says_once_why_it_has_no_steps(
    langchain_server, make_user
):
    # The run holds the loop: its steps could only be written after the reply (and after the
    # turn, when they are refused), so none is shown and the log says what to do instead.
    for city in ("Rome", "Oslo"):
        client, thread_id = await turn(
            langchain_server, make_user(), f"blocking {city}", f"Final Answer: sunny in {city}"
        )
        await client.disconnect()
        written = await rows(thread_id)
        assert [row.type for row in written] == ["user_message", "assistant_message"], [
            (row.type, row.name) for row in written
        ]
    log = langchain_server.log_path.read_text()
    assert log.count("a LangChain run held the chat's event loop") == 1, log
    assert "chat.make_async(chain.invoke)" in log and "Traceback" not in log, log


async def test_to_ignore_empty_shows_the_glue_runs_with_the_steps_nested_under_them(
    langchain_server, make_user
):
    client, _ = await turn(langchain_server, make_user(), "everything Lima", "done everything")
    steps = finished_steps(client)
    assert set(steps) == {
        "RunnableSequence",
        "gather",
        "weather",
        "Notes",
        "ChatPromptTemplate",
        "GenericFakeChatModel",
        "StrOutputParser",
    }, steps
    sequence = steps["RunnableSequence"]
    assert sequence["type"] == "run" and sequence["output"] == "Final Answer: sunny in Lima", sequence
    for name in ("gather", "ChatPromptTemplate", "GenericFakeChatModel", "StrOutputParser"):
        assert steps[name]["parentId"] == sequence["id"], (name, steps[name])
    assert steps["weather"]["parentId"] == steps["gather"]["id"], steps
    # A prompt template and a parser have no step type of their own.
    assert steps["ChatPromptTemplate"]["type"] == steps["StrOutputParser"]["type"] == "undefined", steps
    await client.disconnect()


async def test_answer_reached_set_by_the_app_streams_the_whole_answer_into_a_message(
    langchain_server, make_user
):
    client, thread_id = await turn(
        langchain_server, make_user(), "forced Kyiv", "Final Answer: sunny in Kyiv"
    )
    final_start = answer_stream(client)
    tokens = [d["token"] for n, d in client.events if n == "stream_token" and d["id"] == final_start["id"]]
    assert tokens[:3] == ["Final", " ", "Answer:"] and "".join(tokens) == "Final Answer: sunny in Kyiv", (
        tokens
    )
    written = [row for row in await rows(thread_id) if row.type == "assistant_message"]
    assert [row.output for row in written] == ["Final Answer: sunny in Kyiv"], (
        [(r.type, r.name, r.output) for r in await rows(thread_id)],
        client.events,
    )
    await client.disconnect()


def slow_run_ids(client: ChatClient) -> set[str]:
    """The ids of what the slow run streamed into: its model's step and the final answer."""
    return {d["id"] for n, d in client.events if n == "stream_start" and d.get("name") != "answer"}


async def stopped(client: ChatClient) -> int:
    """Stop the turn and wait for it to end: the index of the stop's notice among the events."""
    await client.emit("stop")
    try:
        await client.wait_for(
            lambda c: any(d.get("metadata", {}).get("notice") == "stopped" for d in c.named("new_message")),
            timeout=30,
        )
        await client.wait_event("task_end", count=2, timeout=30)
    except TimeoutError:
        pytest.fail(
            f"the stop never ended the turn; events: {json.dumps(client.events, indent=1, default=str)}"
        )
    return next(
        i
        for i, (n, d) in enumerate(client.events)
        if n == "new_message" and d.get("metadata", {}).get("notice") == "stopped"
    )


@pytest.mark.parametrize("mode", ["slow-async", "slow-sync"])
async def test_a_stop_in_mid_stream_ends_the_langchain_run_and_the_session_goes_on(
    langchain_server: Any, make_user: Any, mode: str
) -> None:
    """``stop`` while the model streams through the handler: the turn ends, nothing of the
    run streams after the stop's notice, its steps are closed, and the next message is answered."""
    client = await signed_in(langchain_server, make_user())
    await client.start()
    await client.wait_event("task_end")  # the chat's start
    thread_id = str((await client.send(mode))["threadId"])
    await client.wait_event("stream_token", count=5, timeout=30)  # the model is streaming
    acknowledged = await stopped(client)
    streamed = slow_run_ids(client)
    assert streamed, client.events

    # The next message is answered (and gives the stopped run the time to show any leak).
    await client.send("async Paris")
    try:
        await client.wait_text("done async", timeout=30)
        await client.wait_event("task_end", count=3, timeout=30)
    except TimeoutError:
        pytest.fail(f"the session did not answer after the stop; events: {client.events!r}")
    late = [
        (n, d)
        for n, d in client.events[acknowledged:]
        if n in ("stream_token", "stream_start", "new_message", "update_message") and d.get("id") in streamed
    ]
    assert late == [], f"the stopped run streamed after the stop's notice: {late!r}"
    if mode == "slow-sync":  # the app thread's run was ended, not left streaming into nothing
        # It ends at its next token, which a loaded machine may bring after the next turn's end.
        def ended_runs() -> int:
            return Path(langchain_server.log_path).read_text().count("on_llm_new_token callback: TurnOver")

        with contextlib.suppress(TimeoutError):  # the assertion below says so, with the log
            await wait_until(ended_runs, timeout=30)
        log = await asyncio.to_thread(Path(langchain_server.log_path).read_text)
        assert log.count("on_llm_new_token callback: TurnOver") == 1, log[-3000:]

    # Its steps are closed, live and as written.
    slow_steps = [
        d for n, d in client.events[:acknowledged] if n == "new_message" and d.get("type") in STEP_TYPES
    ]
    opened = {d["id"] for d in slow_steps}
    closed = {
        d["id"]: d
        for n, d in client.events
        if n == "update_message" and d.get("id") in opened and d.get("end") is not None
    }
    last = {d["id"]: d for n, d in client.events if d and isinstance(d, dict) and d.get("id") in opened}
    assert opened and set(closed) == opened, f"steps left open: {[last[i] for i in opened - set(closed)]!r}"
    for step in closed.values():  # closed as stopped, not as failed
        assert step["metadata"].get("interrupted") is True and not step["isError"], json.dumps(step)
    written = {str(row.id): row for row in await rows(thread_id)}
    for step_id in opened:
        assert written[step_id].end is not None, (step_id, written[step_id].__dict__)
    await client.disconnect()


def events_of(client: ChatClient, step_id: str) -> list[tuple[str, dict[str, Any]]]:
    """What the client was sent of one step (or message), in order."""
    return [(n, d) for n, d in client.events if isinstance(d, dict) and d.get("id") == step_id]


async def held_turn(server: Any, user: Any, mode: str) -> tuple[ChatClient, str]:
    """A ``held-sync``/``held-fail`` turn, returned once the tool's first write is held."""
    from tests.apps.langchain_app import HELD_SIGNAL

    client = await signed_in(server, user)
    await client.start()
    await client.wait_event("task_end")  # the chat's start
    thread_id = str((await client.send(f"{mode} Paris"))["threadId"])
    try:
        await client.wait_for(
            lambda c: any(d.get("token") == HELD_SIGNAL for d in c.named("stream_token")), timeout=30
        )
    except TimeoutError:
        pytest.fail(f"the tool's write was never held; events: {every_event(client)}")
    return client, thread_id


def every_event(client: ChatClient) -> str:
    return json.dumps(client.events, indent=1, default=str)


async def check_the_held_steps_closed_once(
    client: ChatClient, thread_id: str, *, ended: int, interrupted: bool
) -> dict[str, dict[str, Any]]:
    """The steps of a held turn, its run's and its tool's, each closed once before event
    ``ended`` (the stop's notice, the error's report), none shown open again after its close,
    and all ended as written; their closing StepDicts by name."""
    from tests.apps.langchain_app import HELD_TOOL

    shown = every_event(client)
    steps = {
        d["id"]: d["name"]
        for n, d in client.events
        if n in ("new_message", "stream_start") and d.get("type") in STEP_TYPES
    }
    assert sorted(steps.values()) == sorted([HELD_TOOL, "held"]), f"steps shown: {steps}; events: {shown}"
    closed: dict[str, dict[str, Any]] = {}
    for step_id, name in steps.items():
        told = events_of(client, step_id)
        closes = [i for i, (n, d) in enumerate(told) if n == "update_message" and d.get("end") is not None]
        assert len(closes) == 1, f"{name} closed {len(closes)} times; events: {shown}"
        closed[name] = close = told[closes[0]][1]
        assert told[closes[0] + 1 :] == [], f"{name} shown again after its close; events: {shown}"
        assert client.events.index(told[closes[0]]) < ended, f"{name} closed after the turn's end: {shown}"
        if interrupted:  # closed as stopped, not as failed
            assert close["metadata"].get("interrupted") is True and not close["isError"], f"{name}: {shown}"
    written = {str(row.id): row for row in await rows(thread_id)}
    for step_id, name in steps.items():
        row = written.get(step_id)
        assert row is not None and row.end is not None, (name, row and row.__dict__, shown)
        assert row.output == closed[name]["output"], (name, row.__dict__, shown)  # what was shown
        if interrupted:
            assert row.metadata.get("interrupted") is True, (name, row.__dict__, shown)
    tool_row = written[next(i for i, n in steps.items() if n == HELD_TOOL)]
    assert json.loads(tool_row.input) == {"city": "Paris"}, tool_row.__dict__
    return closed


async def test_a_stop_lets_the_step_change_running_on_the_loop_land_before_it_closes_the_steps(
    langchain_server: Any, make_user: Any
) -> None:
    """``stop`` while the write of a step's start, handed to the loop by the sync handler, is
    held in the database: that change lands first, then the turn closes its steps, that one
    among them; nothing reopens a closed step, and nothing of them comes after the stop."""
    from tests.apps.langchain_app import HELD_NOTE, HELD_SIGNAL

    client, thread_id = await held_turn(langchain_server, make_user(), "held-sync")
    notice = await stopped(client)
    closed = await check_the_held_steps_closed_once(client, thread_id, ended=notice, interrupted=True)
    # The run step kept all it streamed.
    assert closed["held"]["output"] == HELD_NOTE + HELD_SIGNAL, every_event(client)
    await client.disconnect()


async def test_a_failed_hook_lets_the_step_change_running_on_the_loop_land_before_it_closes_the_steps(
    langchain_server: Any, make_user: Any
) -> None:
    """The same with the hook failing while the write is held: the change lands, the failed
    turn closes the step it opened, and the run's next change (the tool's end, handed over
    while the steps are closed) does not close it a second time."""
    from tests.apps.langchain_app import HELD_FAILURE, HELD_NOTE, HELD_SIGNAL, HELD_TOOL

    client, thread_id = await held_turn(langchain_server, make_user(), "held-fail")

    def reported(c: ChatClient) -> bool:
        return any(HELD_FAILURE in str(d.get("output")) for d in c.named("new_message") if d.get("isError"))

    try:
        await client.wait_for(reported, timeout=30)
        await client.wait_event("task_end", count=2, timeout=30)
    except TimeoutError:
        pytest.fail(f"the failure never ended the turn; events: {every_event(client)}")
    # The tool's end, if it came, had its chance to show by now: the run ends at it.
    log = langchain_server.log_path
    with contextlib.suppress(TimeoutError):
        await wait_until(lambda: "on_tool_end callback: TurnOver" in Path(log).read_text(), timeout=10)
    error = next(
        i
        for i, (n, d) in enumerate(client.events)
        if n == "new_message" and d.get("isError") and HELD_FAILURE in str(d.get("output"))
    )
    closed = await check_the_held_steps_closed_once(client, thread_id, ended=error, interrupted=False)
    assert closed["held"]["isError"] is True, every_event(client)
    assert closed["held"]["output"] == f"{HELD_NOTE}{HELD_SIGNAL}\nRuntimeError: {HELD_FAILURE}", every_event(
        client
    )
    assert not closed[HELD_TOOL]["isError"] and closed[HELD_TOOL]["output"] == "", every_event(client)
    await client.disconnect()
