"""Chainlit apps with only the import changed (``tests/apps/chainlit_style/``), each on a real
daphne server, seen through a python-socketio client: what the user gets from plain ``def``
hooks, hooks without arguments, ``cl.context``, ``cl.make_async`` / ``cl.run_sync`` /
``cl.sleep`` and ``cl.cache``."""

import asyncio
import re
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.support.client import ChatClient, signed_in

pytestmark = pytest.mark.django_db(transaction=True)


def app_server(name: str) -> Any:
    @pytest.fixture(scope="module")
    def started(server_factory: Any) -> Any:
        return server_factory.start(CHAT_APP=f"tests.apps.chainlit_style.{name}")

    return started


sync_hooks_server = app_server("sync_hooks")
no_arguments_server = app_server("hook_without_arguments")
context_server = app_server("context_app")
make_async_server = app_server("make_async_app")
cache_server = app_server("cache_app")


async def expect(
    client: ChatClient, wanted: Callable[[list[str]], bool], what: str, timeout: float = 20
) -> None:
    """Wait until the texts the client was shown satisfy ``wanted``; fail showing them."""
    try:
        await client.wait_for(lambda c: wanted(c.texts()), timeout)
    except TimeoutError:
        pytest.fail(f"never shown {what}; shown: {client.texts()!r}; events: {client.events!r}")


def shown(pattern: str) -> Callable[[list[str]], bool]:
    return lambda texts: any(re.fullmatch(pattern, text) for text in texts)


async def started(server: Any, user: Any) -> ChatClient:
    client = await signed_in(server, user)
    await client.start()
    return client


async def test_a_plain_def_chat_start_and_message_run_off_the_loop_and_reach_the_chat(
    sync_hooks_server, make_user
):
    client = await started(sync_hooks_server, make_user())
    await expect(client, shown("Hello from a plain function"), "the plain on_chat_start's greeting")
    await client.send("hi")
    await expect(
        client,
        shown(r"hi: started on chat-app_\d+, answered on chat-app_\d+"),
        "the plain on_message's answer",
    )
    await client.wait_event("task_end", count=2)
    assert not [t for t in client.texts() if "TypeError" in t], client.texts()
    await client.disconnect()


async def test_a_blocking_plain_hook_holds_up_no_other_session(sync_hooks_server, make_user):
    blocked = await started(sync_hooks_server, make_user())
    other = await started(sync_hooks_server, make_user())
    await expect(blocked, shown("Hello from a plain function"), "the greeting")
    await expect(other, shown("Hello from a plain function"), "the greeting")
    await blocked.send("block 6")
    await asyncio.sleep(0.5)  # the blocked hook is sleeping in its thread
    began = time.monotonic()
    await other.send("quick")
    await expect(other, shown(r"quick: .*"), "the other session's answer")
    answered_after = time.monotonic() - began
    assert not [t for t in blocked.texts() if t.startswith("block 6:")], (
        f"the blocked hook answered before the other session ({answered_after:.1f} s): {blocked.texts()}"
    )
    await expect(blocked, shown(r"block 6: .*"), "the blocked hook's answer")
    await blocked.disconnect()
    await other.disconnect()


async def test_hooks_get_only_the_arguments_they_name(no_arguments_server, make_user):
    client = await started(no_arguments_server, make_user())
    answer = await client.send("anything")
    await expect(client, shown("answered without reading the message"), "on_message's answer")
    await client.wait_event("task_end")
    await client.disconnect()
    resumed = ChatClient(no_arguments_server.url, client.cookie)
    await resumed.start(thread_id=str(answer["threadId"]))
    await expect(resumed, shown("resumed without reading the thread"), "on_chat_resume's message")
    await resumed.disconnect()


async def test_the_context_names_the_session_its_user_and_the_running_step(context_server, make_user):
    user = make_user()
    client = await started(context_server, user)
    await expect(client, shown(r"session \S+ thread \S+ user .*"), "the session's ids")
    [greeting] = [t for t in client.texts() if t.startswith("session ")]
    assert greeting == f"session {client.session_id} thread {_thread_of(client)} user {user.username}"
    await client.send("rain")
    await expect(client, shown("lookup looked up rain; outside any step: None"), "the step's own output")
    [custom] = client.named("custom_event")
    assert custom == {"found": "lookup looked up rain"}, client.events
    [tool] = [d for d in client.named("update_message") if d.get("name") == "lookup"]
    assert tool["output"] == "lookup looked up rain", tool
    await client.disconnect()


def _thread_of(client: ChatClient) -> str:
    """The thread of the client's first message, as the server sent it."""
    [first, *_] = client.named("new_message")
    return str(first["threadId"])


async def test_make_async_runs_blocking_code_on_a_thread_that_reaches_the_chat(make_async_server, make_user):
    client = await started(make_async_server, make_user())
    await client.send("report")
    await expect(client, shown(r"done: REPORT \(on chat-app_\d+\)"), "the blocking function's result")
    texts = client.texts()
    assert texts.index("working on report") < next(i for i, t in enumerate(texts) if t.startswith("done:")), (
        texts
    )
    await client.disconnect()


async def test_cache_builds_once_for_every_session_of_the_process(cache_server, make_user):
    first = await started(cache_server, make_user())
    second = await started(cache_server, make_user())
    for client in (first, second):
        await expect(client, shown("using small model, build 1"), "the cached model")
        await client.disconnect()


def test_an_app_that_fails_to_import_stops_the_servers_start_with_its_traceback(server_factory):
    with pytest.raises(RuntimeError) as refused:
        server_factory.start(CHAT_APP="tests.apps.chainlit_style.broken_import")
    log = str(refused.value)
    assert "exited" in log, log  # not "did not start": the process ended
    assert "CHAT_APP='tests.apps.chainlit_style.broken_import' could not be imported" in log, log
    assert "Traceback (most recent call last)" in log, log
    assert "No module named 'a_package_this_app_forgot_to_install'" in log, log


window_messages_server = app_server("window_messages")


async def test_a_window_message_reaches_the_hook_and_its_answer_comes_back(window_messages_server, make_user):
    client = await started(window_messages_server, make_user())
    await client.emit("window_message", "Client: hello")
    await expect(client, shown("Window message received: Client: hello"), "the hook's message")
    try:
        await client.wait_event("window_message")
    except TimeoutError:
        pytest.fail(f"no window_message back; events: {client.events!r}")
    assert client.named("window_message") == ["Server: Client: hello"], client.events
    await client.disconnect()


instrument_openai_server = app_server("instrument_openai_app")
types_import_server = app_server("types_import")


async def test_instrument_openai_is_accepted_and_said_to_do_nothing_once(instrument_openai_server, make_user):
    for _ in range(2):
        client = await started(instrument_openai_server, make_user())
        await expect(client, shown("instrumented"), "on_chat_start's message")
        await client.disconnect()
    log = instrument_openai_server.log_path.read_text()
    assert log.count("chat.instrument_openai() does nothing in Tether") == 1, log


async def test_an_app_typed_with_chainlit_types_resumes_its_thread(types_import_server, make_user):
    client = await started(types_import_server, make_user())
    answer = await client.send("one")
    await expect(client, shown("echo one"), "the echo")
    await client.wait_event("task_end", count=2)
    await client.disconnect()
    again = ChatClient(types_import_server.url, client.cookie)
    await again.start(thread_id=str(answer["threadId"]))
    await expect(again, shown(f"resumed {answer['threadId']} after 2 steps"), "on_chat_resume's message")
    await again.disconnect()


custom_element_server = app_server("custom_element")


async def test_a_custom_element_goes_out_as_chainlit_sends_it(custom_element_server, make_user):
    client = await started(custom_element_server, make_user())
    await expect(client, shown("This message has a counter"), "the message")
    try:
        [element] = await client.wait_event("element")
    except TimeoutError:
        pytest.fail(f"no element; events: {client.events!r}")
    [message] = [m for m in client.named("new_message") if m["output"] == "This message has a counter"]
    assert element["type"] == "custom" and element["name"] == "Counter", element
    assert element["props"] == {"count": 0, "label": "clicks"}, element
    assert element["mime"] == "application/json" and element["forId"] == message["id"], element
    await client.disconnect()


plain_step_server = app_server("plain_step")


async def test_a_plain_function_step_is_shown_nested_under_the_message(plain_step_server, make_user):
    client = await started(plain_step_server, make_user())
    await client.send("rain")
    await expect(client, shown("tool said: result for rain"), "the reply")
    [user_step] = [m for m in client.named("new_message") if m["type"] == "user_message"]
    [opened] = [m for m in client.named("new_message") if m["name"] == "tool"]
    [finished] = [m for m in client.named("update_message") if m["name"] == "tool"]
    assert opened["type"] == "tool" and opened["parentId"] == user_step["id"], opened
    assert finished["output"] == "result for rain" and finished["end"], finished
    assert '"query": "rain"' in finished["input"], finished
    await client.disconnect()


langchain_lcel_server = app_server("langchain_lcel")


async def test_the_langchain_handler_shows_an_lcel_chains_model_call_as_a_step(
    langchain_lcel_server, make_user
):
    client = await started(langchain_lcel_server, make_user())
    await client.wait_event("task_end")  # on_chat_start's
    await client.send("When was the Battle of Hastings?")
    await expect(client, shown("The Battle of Hastings was in 1066."), "the streamed answer")
    await client.wait_event("task_end", count=2)
    [question] = [d for d in client.named("new_message") if d["type"] == "user_message"]
    steps = {d["id"]: d for d in client.named("update_message") if d["type"] not in ("assistant_message",)}
    # The prompt, the sequence and the parser are glue: only the model call is a step.
    [llm] = [d for d in steps.values() if d["type"] == "llm"]
    assert len(steps) == 1 and llm["name"] == "FakeListChatModel", client.events
    assert llm["parentId"] == question["id"], (llm, question)
    assert "When was the Battle of Hastings?" in llm["input"] and "historian" in llm["input"], llm
    assert llm["output"] == "The Battle of Hastings was in 1066." and llm["end"], llm
    # Its tokens were streamed into the step, and the chain's into the app's message.
    assert len([d for d in client.named("stream_token") if d["id"] == llm["id"]]) > 10, client.events
    await client.disconnect()
