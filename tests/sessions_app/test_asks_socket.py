"""Actions and asks on the wire (python-socketio clients against daphne running
``tests.apps.asks_app``): the ``ask {msg, spec}`` event; answers by Chainlit's ack and by
``ask_answer``; two tabs answering at once (one wins, both cleared, the hook gets one value);
a reconnect mid-ask; timeout; stop; foreign and bad ids refused without a change; action
buttons kept with their message and their callbacks run once per click."""

import asyncio
import hashlib
import uuid
from typing import Any

import aiohttp
import pytest
from asgiref.sync import sync_to_async

from tests.media_app.photos import photo
from tests.support.client import ChatClient, api_token, user_cookie
from threads_app.models import Ask, Step

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def asks_server(server_factory):
    return server_factory.start(CHAT_APP="tests.apps.asks_app")


class TabClient(ChatClient):
    """A tab that can answer ``ask`` by its acknowledgement (``ack_with``), as Chainlit's does."""

    ack_with: Any = None

    def new_socketio_client(self):
        sio = super().new_socketio_client()

        async def on_ask(data: Any) -> Any:
            self.events.append(("ask", data))
            async with self._changed:
                self._changed.notify_all()
            return self.ack_with(data) if callable(self.ack_with) else self.ack_with

        sio.on("ask", on_ask)
        return sio


async def tab(server: Any, user: Any, **kwargs: Any) -> TabClient:
    return TabClient(server.url, await user_cookie(server.url, user), **kwargs)


@sync_to_async
def ask_row(ask_id: str) -> Ask:
    return Ask.objects.get(pk=ask_id)


@sync_to_async
def transcript(thread_id: str) -> list[tuple[str, str]]:
    return list(Step.objects.filter(thread_id=thread_id).order_by("seq").values_list("type", "output"))


@sync_to_async
def step_metadata(step_id: str) -> Any:
    return Step.objects.get(pk=step_id).metadata


async def api_get(server: Any, user: Any, path: str) -> Any:
    headers = {"Authorization": f"Token {await api_token(user)}"}
    async with aiohttp.ClientSession(headers=headers) as http, http.get(f"{server.url}{path}") as response:
        assert response.status == 200, await response.text()
        return await response.json()


async def asked(client: ChatClient, count: int = 1) -> Any:
    return (await client.wait_event("ask", count))[-1]


async def start_asking(
    server: Any, user: Any, command: str = "ask name"
) -> tuple[TabClient, str, dict[str, Any]]:
    client = await tab(server, user)
    await client.start()
    answer = await client.send(command)
    return client, str(answer["threadId"]), await asked(client)


async def test_a_text_ask_is_sent_with_its_spec_and_answered_by_the_ack(
    asks_server: Any, make_user: Any
) -> None:
    client = await tab(asks_server, make_user())
    client.ack_with = {"output": "Ada"}
    await client.start()
    thread_id = str((await client.send("ask name"))["threadId"])
    ask = await asked(client)
    assert ask["msg"]["output"] == "What is your name?"
    spec = ask["spec"]
    assert spec["type"] == "text" and spec["step_id"] == ask["msg"]["id"]
    assert 55 <= spec["timeout"] <= 60 and spec["askId"] and spec["deadline"]
    await client.wait_text("Hello, Ada!")
    cleared = await client.wait_event("clear_ask")
    assert {"askId": spec["askId"], "stepId": spec["step_id"]} in cleared
    row = await ask_row(spec["askId"])
    assert row.state == Ask.State.ANSWERED and row.answer == {"output": "Ada"}
    # The question and the reply are in the transcript, the reply as the user's message.
    assert await transcript(thread_id) == [
        ("user_message", "ask name"),
        ("assistant_message", "What is your name?"),
        ("user_message", "Ada"),
        ("assistant_message", "Hello, Ada!"),
    ]
    await client.disconnect()


async def test_a_text_answer_drawn_under_its_clients_id_is_shown_under_that_id(
    asks_server: Any, make_user: Any
) -> None:
    """Chainlit's frontend answers with the StepDict it already shows: the reply comes back
    under that id (the client updates its copy, not a second one); a non-UUID id is ignored."""
    drawn_as = str(uuid.uuid4())
    client = await tab(asks_server, make_user())
    client.ack_with = {"id": drawn_as, "type": "user_message", "output": "Ada"}
    await client.start()
    thread_id = str((await client.send("ask name"))["threadId"])
    ask = await asked(client)
    await client.wait_text("Hello, Ada!")
    replies = [data for name, data in client.events if name == "new_message" and data["output"] == "Ada"]
    assert [r["id"] for r in replies] == [drawn_as], client.events
    step = await sync_to_async(Step.objects.get)(thread_id=thread_id, type="user_message", output="Ada")
    assert step.metadata["acceptedIds"] == [drawn_as] and str(step.pk) != drawn_as
    assert (await ask_row(ask["spec"]["askId"])).answer == {"output": "Ada", "id": drawn_as}

    other = await tab(asks_server, make_user())
    other.ack_with = {"id": "not-a-uuid", "output": "Bo"}
    await other.start()
    await other.send("ask name")
    await asked(other)
    await other.wait_text("Hello, Bo!")
    shown = [data["id"] for name, data in other.events if name == "new_message" and data["output"] == "Bo"]
    assert len(shown) == 1 and shown[0] != "not-a-uuid", other.events
    await client.disconnect()
    await other.disconnect()


async def test_an_ask_is_answered_by_ask_answer_once_and_a_second_answer_is_refused(
    asks_server: Any, make_user: Any
) -> None:
    client, _thread, ask = await start_asking(asks_server, make_user())
    ask_id = ask["spec"]["askId"]
    assert await client.call("ask_answer", {"askId": ask_id, "answer": {"output": ""}}) == {
        "error": "a text ask takes {output: <non-empty text>}"
    }
    nul = await client.call("ask_answer", {"askId": ask_id, "answer": {"output": "a\x00b"}})
    assert nul == {"error": "answer.output must not contain NUL characters"}
    assert (await ask_row(ask_id)).state == Ask.State.OPEN  # bad input changed nothing
    long_name = "Bob" + " Bobson" * 2000  # a long answer, as long as a message may be
    assert await client.call("ask_answer", {"askId": ask_id, "answer": {"output": long_name}}) == {
        "success": True,
        "askId": ask_id,
    }
    again = await client.call("ask_answer", {"askId": ask_id, "answer": {"output": "Eve"}})
    assert "no open ask" in again["error"]
    await client.wait_text(f"Hello, {long_name}!")
    assert (await ask_row(ask_id)).answer == {"output": long_name}
    await client.disconnect()


async def test_two_tabs_answering_at_once_make_one_answer_and_both_are_cleared(
    asks_server: Any, make_user: Any
) -> None:
    user = make_user()
    first, thread_id, ask = await start_asking(asks_server, user)
    second = await tab(asks_server, user)
    await second.start(thread_id=thread_id)  # another tab (its own session) on the thread
    again = await asked(second)  # shown the open ask on connecting
    assert again["spec"]["askId"] == ask["spec"]["askId"] and again["msg"]["id"] == ask["msg"]["id"]
    ask_id = ask["spec"]["askId"]
    answers = await asyncio.gather(
        first.call("ask_answer", {"askId": ask_id, "answer": {"output": "One"}}),
        second.call("ask_answer", {"askId": ask_id, "answer": {"output": "Two"}}),
    )
    winners = [a for a in answers if a.get("success")]
    assert len(winners) == 1, answers
    # The other is told the ask is closed: by the claim, or (when its lookup came after the
    # winner's claim, one Redis trip for the answer budget apart) by the lookup.
    error = next(a for a in answers if "error" in a)["error"]
    assert "already answered" in error or "it was answered" in error, error
    row = await ask_row(ask_id)
    assert row.answer is not None
    won = row.answer["output"]
    for client in (first, second):
        await client.wait_for(
            lambda c: any(isinstance(e, dict) and e.get("askId") == ask_id for e in c.named("clear_ask"))
        )
    await first.wait_text(f"Hello, {won}!")
    await asyncio.sleep(1.0)  # a second answer would have reached the hook by now
    hellos = [t for t in first.texts() if t.startswith("Hello, ")]
    assert hellos == [f"Hello, {won}!"]
    assert [o for t, o in await transcript(thread_id) if o.startswith("Hello")] == [f"Hello, {won}!"]
    await first.disconnect()
    await second.disconnect()


async def test_a_reconnect_of_the_same_session_mid_ask_shows_it_again_and_it_can_be_answered(
    asks_server: Any, make_user: Any
) -> None:
    client, thread_id, ask = await start_asking(asks_server, make_user())
    await client.disconnect()
    await asyncio.sleep(0.3)
    client.events.clear()
    client.ack_with = {"output": "Back"}
    await client.start(thread_id=thread_id)  # the same sessionId: a restored session
    again = await asked(client)
    assert again["spec"]["askId"] == ask["spec"]["askId"]
    assert again["spec"]["timeout"] <= ask["spec"]["timeout"]
    names = [name for name, _ in client.events]
    assert names.index("clear_ask") < names.index("ask")  # cleared first, then shown again
    await client.wait_text("Hello, Back!")
    after = client.events[names.index("ask") :]
    hello = next(
        i
        for i, (name, data) in enumerate(after)
        if name == "new_message" and data["output"] == "Hello, Back!"
    )
    assert "task_end" in [name for name, _ in after[:hello]]  # the turn was paused on the question
    await client.disconnect()


async def test_an_ask_that_times_out_returns_none_and_is_cleared(asks_server: Any, make_user: Any) -> None:
    client, _thread, ask = await start_asking(asks_server, make_user(), "ask name 1")
    await client.wait_text("No name given.", timeout=10)
    ask_id = ask["spec"]["askId"]
    assert {"askId": ask_id} in client.named("ask_timeout")
    assert any(isinstance(e, dict) and e.get("askId") == ask_id for e in client.named("clear_ask"))
    assert (await ask_row(ask_id)).state == Ask.State.TIMED_OUT
    late = await client.call("ask_answer", {"askId": ask_id, "answer": {"output": "late"}})
    assert "no open ask" in late["error"]
    await client.disconnect()


async def test_stop_cancels_the_ask(asks_server: Any, make_user: Any) -> None:
    client, _thread, ask = await start_asking(asks_server, make_user())
    ask_id = ask["spec"]["askId"]
    await client.emit("stop")
    await client.wait_text("Task manually stopped.")
    await client.wait_for(
        lambda c: any(isinstance(e, dict) and e.get("askId") == ask_id for e in c.named("clear_ask"))
    )
    assert (await ask_row(ask_id)).state == Ask.State.CANCELLED
    assert (
        "no open ask"
        in (await client.call("ask_answer", {"askId": ask_id, "answer": {"output": "x"}}))["error"]
    )
    assert "Hello" not in " ".join(client.texts())
    await client.disconnect()


async def test_clear_session_cancels_the_ask(asks_server: Any, make_user: Any) -> None:
    client, _thread, ask = await start_asking(asks_server, make_user())
    await client.emit("clear_session")
    await client.wait_for(lambda c: any(isinstance(e, dict) for e in c.named("clear_ask")))
    assert (await ask_row(ask["spec"]["askId"])).state == Ask.State.CANCELLED
    await client.disconnect()


async def test_another_users_ask_and_unknown_ids_are_refused_and_change_nothing(
    asks_server: Any, make_user: Any
) -> None:
    owner, _thread, ask = await start_asking(asks_server, make_user())
    ask_id = ask["spec"]["askId"]
    stranger = await tab(asks_server, make_user())
    await stranger.start()
    for payload in (
        {"askId": ask_id, "answer": {"output": "mine now"}},
        {"stepId": ask["spec"]["step_id"], "answer": {"output": "mine now"}},
        {"askId": str(uuid.uuid4()), "answer": {"output": "x"}},
    ):
        assert "no open ask" in (await stranger.call("ask_answer", payload))["error"]
    assert (await stranger.call("ask_answer", {"askId": "nope"}))["error"] == "askId must be a UUID"
    assert "needs" in (await stranger.call("ask_answer", ["a list"]))["error"]
    assert (await ask_row(ask_id)).state == Ask.State.OPEN
    assert (await owner.call("ask_answer", {"stepId": ask["spec"]["step_id"], "answer": "Owner"}))["success"]
    await owner.wait_text("Hello, Owner!")
    await owner.disconnect()
    await stranger.disconnect()


async def test_an_action_ask_takes_one_of_its_actions_and_removes_them(
    asks_server: Any, make_user: Any
) -> None:
    client, _thread, ask = await start_asking(asks_server, make_user(), "ask pick")
    spec = ask["spec"]
    actions = ask["msg"]["metadata"]["actions"]
    assert spec["type"] == "action" and spec["keys"] == [a["id"] for a in actions]
    assert [(a["name"], a["label"], a["forId"]) for a in actions] == [
        ("go", "Go on", ask["msg"]["id"]),
        ("halt", "Halt", ask["msg"]["id"]),
    ]
    assert actions[0]["tooltip"] == "Carry on" and actions[0]["icon"] == "check"
    bad = await client.call("ask_answer", {"askId": spec["askId"], "answer": {"id": str(uuid.uuid4())}})
    assert "one of its actions" in bad["error"]
    ok = await client.call("ask_answer", {"askId": spec["askId"], "answer": actions[0]})
    assert ok["success"]
    await client.wait_text("Chosen: go {'go': True}")
    await client.wait_text("**Selected:** Go on")
    assert (await step_metadata(ask["msg"]["id"]))["actions"] == []
    await client.disconnect()


async def test_a_file_ask_takes_uploads_of_the_accepted_types(asks_server: Any, make_user: Any) -> None:
    user = make_user()
    client, _thread, ask = await start_asking(asks_server, user, "ask file")
    spec = ask["spec"]
    assert spec["type"] == "file" and spec["accept"] == ["image/png"]
    assert spec["max_size_mb"] == 1 and spec["max_files"] == 2
    token = await api_token(user)
    uploaded = {}
    async with aiohttp.ClientSession(headers={"Authorization": f"Token {token}"}) as http:
        for kind, name in (("image/png", "dot.png"), ("image/jpeg", "dot.jpg")):
            form = aiohttp.FormData()
            form.add_field("file", photo(kind, 2000), filename=name, content_type=kind)
            async with http.post(f"{asks_server.url}/api/uploads/", data=form) as response:
                assert response.status == 201, await response.text()
                uploaded[kind] = (await response.json())["id"]
    refused = await client.call(
        "ask_answer", {"askId": spec["askId"], "answer": [{"id": uploaded["image/jpeg"]}]}
    )
    assert "not a type this ask accepts" in refused["error"]
    three = [{"id": uploaded["image/png"]}] * 3
    assert (
        "at most 2" in (await client.call("ask_answer", {"askId": spec["askId"], "answer": three}))["error"]
    )
    ok = await client.call("ask_answer", {"askId": spec["askId"], "answer": [{"id": uploaded["image/png"]}]})
    assert ok["success"]
    await client.wait_text("Files: dot.png image/png 2000 2000")
    await client.disconnect()


@pytest.fixture(scope="module")
def asks_files_server(server_factory, tmp_path_factory):
    """The asks app with uploads other than photos allowed, kept in a filesystem storage."""
    return server_factory.start(
        CHAT_APP="tests.apps.asks_app",
        ELEMENTS_DIR=str(tmp_path_factory.mktemp("ask-files")),
        UPLOAD_ALLOWED_TYPES="image/*,application/pdf,text/plain",
    )


async def test_a_file_ask_answered_with_a_pdf_and_a_text_file_gives_the_app_their_bytes(
    asks_files_server: Any, make_user: Any
) -> None:
    user = make_user()
    client, _thread, ask = await start_asking(asks_files_server, user, "ask doc")
    assert ask["spec"]["accept"] == ["application/pdf", "text/plain"]
    files = {
        "report.pdf": b"%PDF-1.4\n" + bytes(range(256)) * 20 + b"\n%%EOF\n",
        "notes.txt": "caf\u00e9 notes\n".encode() * 100,
    }
    uploaded = []
    async with aiohttp.ClientSession(headers={"Authorization": f"Token {await api_token(user)}"}) as http:
        for name, data in files.items():
            form = aiohttp.FormData()
            form.add_field("file", data, filename=name)
            async with http.post(f"{asks_files_server.url}/api/uploads/", data=form) as response:
                assert response.status == 201, await response.text()
                uploaded.append({"id": (await response.json())["id"]})
    ok = await client.call("ask_answer", {"askId": ask["spec"]["askId"], "answer": uploaded})
    assert ok["success"]
    for (name, data), mime in zip(files.items(), ("application/pdf", "text/plain"), strict=True):
        digest = hashlib.sha256(data).hexdigest()[:16]
        await client.wait_text(f"Doc: {name} {mime} {len(data)} {len(data)} {digest} path=same")
    await client.disconnect()


async def test_a_foreign_upload_is_refused_by_a_file_ask(asks_server: Any, make_user: Any) -> None:
    client, _thread, ask = await start_asking(asks_server, make_user(), "ask file")
    other = make_user()
    async with aiohttp.ClientSession(headers={"Authorization": f"Token {await api_token(other)}"}) as http:
        form = aiohttp.FormData()
        form.add_field("file", photo("image/png", 1000), filename="x.png", content_type="image/png")
        async with http.post(f"{asks_server.url}/api/uploads/", data=form) as response:
            foreign = (await response.json())["id"]
    refused = await client.call("ask_answer", {"askId": ask["spec"]["askId"], "answer": [{"id": foreign}]})
    assert refused["error"] == "no such upload of yours"
    assert (await ask_row(ask["spec"]["askId"])).state == Ask.State.OPEN
    await client.disconnect()


async def buttons(server: Any, user: Any) -> tuple[TabClient, str, dict[str, Any]]:
    client = await tab(server, user)
    await client.start()
    thread_id = str((await client.send("buttons"))["threadId"])
    await client.wait_text("Pick a colour")
    message = next(m for m in client.named("new_message") if m["output"] == "Pick a colour")
    return client, thread_id, message


async def test_actions_go_with_their_message_and_are_kept_in_the_history(
    asks_server: Any, make_user: Any
) -> None:
    user = make_user()
    client, thread_id, message = await buttons(asks_server, user)
    actions = message["metadata"]["actions"]
    assert [(a["name"], a["label"], a["payload"]) for a in actions] == [
        ("colour", "Red", {"value": "red"}),
        ("colour", "Blue", {"value": "blue"}),
        ("vanish", "Use once", {}),
    ]
    assert all(a["forId"] == message["id"] for a in actions)
    # ... and, as Chainlit's clients expect, one ``action`` event each.
    assert [a["id"] for a in await client.wait_event("action", 3)] == [a["id"] for a in actions]
    history = (await api_get(asks_server, user, f"/api/threads/{thread_id}/history/"))["results"]
    stored = next(s for s in history if s["id"] == message["id"])
    assert stored["metadata"]["actions"] == actions
    await client.disconnect()


async def test_an_action_callback_runs_once_per_click_and_foreign_ids_are_refused(
    asks_server: Any, make_user: Any
) -> None:
    user = make_user()
    client, thread_id, message = await buttons(asks_server, user)
    red, _blue, vanish = message["metadata"]["actions"]
    watcher = await tab(asks_server, user)
    await watcher.start(thread_id=thread_id)  # the message is on a second tab too
    assert (await client.call("action_call", {"action": red}))["success"]
    await client.wait_text("Colour: red")
    await asyncio.sleep(1.0)
    assert client.texts().count("Colour: red") == 1
    assert (await client.call("action_call", {"action": {"id": red["id"], "forId": red["forId"]}}))["success"]
    await client.wait_for(lambda c: c.texts().count("Colour: red") == 2)

    stranger = await tab(asks_server, make_user())
    await stranger.start()
    assert (await stranger.call("action_call", {"action": red}))[
        "error"
    ] == "no such action on a message of this chat"
    made_up = {"id": str(uuid.uuid4()), "forId": red["forId"]}
    assert (await client.call("action_call", {"action": made_up}))[
        "error"
    ] == "no such action on a message of this chat"
    assert (await client.call("action_call", {"action": {"id": "x"}}))["error"] == "action.id must be a UUID"

    # A callback that removes its action: gone from the step and every tab, refused after.
    assert (await client.call("action_call", {"action": vanish}))["success"]
    await client.wait_text("Used once.")
    await watcher.wait_for(lambda c: any(a["id"] == vanish["id"] for a in c.named("remove_action")))
    assert [a["id"] for a in (await step_metadata(message["id"]))["actions"]] == [red["id"], _blue["id"]]
    again = await watcher.call("action_call", {"action": vanish})
    assert again["error"] == "no such action on a message of this chat"
    await asyncio.sleep(0.5)
    assert client.texts().count("Used once.") == 1
    for each in (client, watcher, stranger):
        await each.disconnect()


async def test_bootstrap_lists_the_open_asks(asks_server: Any, make_user: Any) -> None:
    user = make_user()
    client, thread_id, ask = await start_asking(asks_server, user)
    body = await api_get(asks_server, user, f"/api/threads/{thread_id}/bootstrap/")
    assert [a["spec"]["askId"] for a in body["asks"]] == [ask["spec"]["askId"]]
    assert body["asks"][0]["msg"]["output"] == "What is your name?"
    await client.call("ask_answer", {"askId": ask["spec"]["askId"], "answer": {"output": "Z"}})
    await client.wait_text("Hello, Z!")
    assert (await api_get(asks_server, user, f"/api/threads/{thread_id}/bootstrap/"))["asks"] == []
    await client.disconnect()


async def test_another_tab_answers_an_action_ask_by_its_ack_and_both_see_the_choice(
    asks_server: Any, make_user: Any
) -> None:
    user = make_user()
    first, thread_id, ask = await start_asking(asks_server, user, "ask pick")
    halt = ask["msg"]["metadata"]["actions"][1]
    second = await tab(asks_server, user)
    second.ack_with = lambda data: halt if data["spec"]["askId"] == ask["spec"]["askId"] else None
    await second.start(thread_id=thread_id)
    await first.wait_text("Chosen: halt {'go': False}")
    for client in (first, second):
        await client.wait_for(
            lambda c: any(
                isinstance(e, dict) and e.get("askId") == ask["spec"]["askId"] for e in c.named("clear_ask")
            )
        )
    # The question, without its buttons, says what was chosen on the other tab too.
    await second.wait_for(
        lambda c: any(
            m["id"] == ask["msg"]["id"] and m["output"] == "**Selected:** Halt"
            for m in c.named("update_message")
        )
    )
    assert (await step_metadata(ask["msg"]["id"]))["actions"] == []
    # The turn paused while the user chose (task_end), then went on (task_start).
    names = [name for name, _ in first.events if name in ("ask", "task_start", "task_end")]
    assert names[names.index("ask") :][:3] == ["ask", "task_end", "task_start"]
    await first.disconnect()
    await second.disconnect()


async def test_a_button_of_a_greeting_works_before_the_thread_exists_and_starts_it(
    asks_server: Any, make_user: Any
) -> None:
    client = await tab(asks_server, make_user())
    await client.start(userEnv='{"greet": "buttons"}')
    await client.wait_text("Welcome")
    greeting = next(m for m in client.named("new_message") if m["output"] == "Welcome")
    green = greeting["metadata"]["actions"][0]
    assert (await client.call("action_call", {"action": green}))["success"]
    await client.wait_text("Colour: green")
    started = await client.wait_event("first_interaction")
    thread_id = started[0]["thread_id"]
    assert started[0]["interaction"] == "Green"  # as Chainlit: the click starts the thread
    assert await transcript(thread_id) == [
        ("assistant_message", "Welcome"),
        ("assistant_message", "Colour: green"),
    ]
    await client.disconnect()


async def test_a_question_asked_before_the_thread_exists_is_answered_and_names_the_thread(
    asks_server: Any, make_user: Any
) -> None:
    client = await tab(asks_server, make_user())
    await client.start(userEnv='{"greet": "ask"}')
    ask = await asked(client)
    assert ask["msg"]["output"] == "Who are you?"
    assert ask["sessionId"] == client.session_id
    assert (await client.call("ask_answer", {"askId": ask["spec"]["askId"], "answer": {"output": "Alan"}}))[
        "success"
    ]
    await client.wait_text("Welcome, Alan!")
    started = await client.wait_event("first_interaction")
    assert started[0]["interaction"] == "Alan"
    assert await transcript(started[0]["thread_id"]) == [
        ("assistant_message", "Who are you?"),
        ("user_message", "Alan"),
        ("assistant_message", "Welcome, Alan!"),
    ]
    await client.disconnect()


async def api_post(server: Any, user: Any, path: str, body: Any) -> tuple[int, Any]:
    headers = {"Authorization": f"Token {await api_token(user)}"}
    async with (
        aiohttp.ClientSession(headers=headers) as http,
        http.post(f"{server.url}{path}", json=body) as response,
    ):
        return response.status, await response.json()


async def test_a_click_over_http_runs_the_callback_in_the_session_and_foreign_ids_are_404(
    asks_server: Any, make_user: Any
) -> None:
    user = make_user()
    client, _thread, message = await buttons(asks_server, user)
    red = message["metadata"]["actions"][0]
    click = {"sessionId": client.session_id, "action": red}  # Chainlit's body, the whole action
    assert await api_post(asks_server, user, "/api/project/action", click) == (
        200,
        {"success": True, "response": None},
    )
    await client.wait_text("Colour: red")
    stranger = make_user()
    status, body = await api_post(asks_server, stranger, "/api/project/action", click)
    assert (status, body) == (404, {"detail": "no such action on a message of this chat"})
    made_up = {"sessionId": client.session_id, "action": {"id": str(uuid.uuid4()), "forId": red["forId"]}}
    assert (await api_post(asks_server, user, "/api/project/action", made_up))[0] == 404
    unknown = {"sessionId": str(uuid.uuid4()), "action": red}
    assert (await api_post(asks_server, user, "/api/project/action", unknown))[0] == 404
    assert (await api_post(asks_server, user, "/api/project/action", {"action": red}))[0] == 400
    await client.disconnect()
    await asyncio.sleep(0.3)
    status, body = await api_post(asks_server, user, "/api/project/action", click)
    assert status == 409 and "reconnect" in body["detail"]
    await asyncio.sleep(0.5)
    assert client.texts().count("Colour: red") == 1
