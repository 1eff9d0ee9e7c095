"""Chat settings on the wire (python-socketio client against daphne running
``tests.apps.settings_app``, which declares one input of every kind in on_chat_start, says its
settings in every reply and keeps what ``on_settings_update`` got in its user session):
the ``chat_settings`` payload, a valid ``chat_settings_change`` reaching the hook whole and
persisted with the thread, invalid ones refused with the input named and nothing applied,
and the panel with its values coming back on a reconnect and on a resume."""

from typing import Any

import aiohttp
import pytest
from asgiref.sync import sync_to_async

from tests.support.client import ChatClient, session_cookie, signed_in
from tests.support.waiting import settle, wait_until_async
from tests.support.wire import in_process_socket
from threads_app.models import Thread

pytestmark = pytest.mark.django_db(transaction=True)

INITIAL = {
    "model": "small",
    "stream": True,
    "temperature": 0.5,
    "persona": "helpful",
    "max_words": 100,
    "topics": ["news"],
    "days": ["mon"],
}
READY = "Ready with model=small stream=True temperature=0.5 persona=helpful max_words=100 topics=news"


@pytest.fixture(scope="module")
def settings_server(server_factory):
    return server_factory.start(CHAT_APP="tests.apps.settings_app")


@sync_to_async
def thread_row(thread_id: str) -> Thread:
    return Thread.objects.get(pk=thread_id)


def values(payload: list[dict[str, Any]]) -> dict[str, Any]:
    return {spec["id"]: spec["initial"] for spec in payload}


async def started_thread(server: Any, user: Any) -> tuple[ChatClient, str]:
    """A client whose chat declared its settings and has a thread (one message answered)."""
    client = await signed_in(server, user)
    await client.start()
    await client.wait_text(READY)
    answer = await client.send("hello")
    await client.wait_for(lambda c: any(t.endswith("] hello") for t in c.texts()))
    return client, str(answer["threadId"])


async def test_the_chat_settings_event_declares_every_input_with_chainlits_fields(
    settings_server: Any, make_user: Any
) -> None:
    client = await signed_in(settings_server, make_user())
    await client.start()
    [payload] = await client.wait_event("chat_settings")
    by_id = {spec["id"]: spec for spec in payload}
    assert [spec["id"] for spec in payload] == list(INITIAL)
    assert values(payload) == INITIAL
    assert {spec["id"]: spec["type"] for spec in payload} == {
        "model": "select",
        "stream": "switch",
        "temperature": "slider",
        "persona": "textinput",
        "max_words": "numberinput",
        "topics": "tags",
        "days": "multiselect",
    }
    assert by_id["model"]["items"] == [
        {"label": "small", "value": "small"},
        {"label": "large", "value": "large"},
    ]
    assert by_id["model"]["tooltip"] == "Which model answers"
    assert (by_id["temperature"]["min"], by_id["temperature"]["max"], by_id["temperature"]["step"]) == (
        0,
        1,
        0.1,
    )
    assert by_id["persona"]["placeholder"] == "Who answers"
    assert by_id["topics"]["values"] == ["news", "sport", "weather"]
    assert by_id["days"]["items"] == [
        {"label": "Monday", "value": "mon"},
        {"label": "Tuesday", "value": "tue"},
    ]
    assert by_id["days"]["description"] == "When to write"
    assert all({"label", "description", "disabled"} <= spec.keys() for spec in payload)
    await client.wait_text(READY)
    await client.disconnect()


async def test_a_valid_change_reaches_on_settings_update_whole_is_persisted_and_used(
    settings_server: Any, make_user: Any
) -> None:
    client, thread_id = await started_thread(settings_server, make_user())
    change = {"model": "large", "temperature": 0.8, "topics": ["sport", "weather"], "days": ["tue", "mon"]}
    assert await client.call("chat_settings_change", change) is None
    expected = {**INITIAL, **change}

    async def saved() -> bool:
        thread = await thread_row(thread_id)
        return bool(thread.chat_settings == expected and thread.metadata.get("updates") == [expected])

    await wait_until_async(saved)
    thread = await thread_row(thread_id)
    assert thread.metadata["chat_settings"] == expected
    assert [spec["id"] for spec in thread.metadata["chat_settings_inputs"]] == list(INITIAL)

    await client.send("again")
    await client.wait_text(
        "[model=large stream=True temperature=0.8 persona=helpful max_words=100 topics=sport,weather] again"
    )
    await client.disconnect()


BAD_CHANGES = [
    ({"colour": "red"}, "colour", "unknown chat settings: colour"),
    ({"model": "huge"}, "model", "Model (model) must be one of ['small', 'large']"),
    ({"model": 1}, "model", "must be one of"),
    ({"stream": "yes"}, "stream", "Stream the reply (stream) must be true or false"),
    ({"temperature": 1.5}, "temperature", "Temperature (temperature) must be at most 1"),
    ({"temperature": -0.1}, "temperature", "must be at least 0"),
    ({"temperature": 0.55}, "temperature", "must be a multiple of 0.1"),
    ({"temperature": True}, "temperature", "must be a number"),
    ({"persona": "x" * 41}, "persona", "Persona (persona) is longer than 40 characters"),
    ({"persona": "a\x00b"}, "persona", "must not contain NUL characters"),
    ({"max_words": "10"}, "max_words", "must be a number"),
    ({"max_words": 0}, "max_words", "must be at least 1"),
    ({"max_words": 2.5}, "max_words", "must be a multiple of 1"),
    ({"topics": "news"}, "topics", "must be a list of strings"),
    ({"topics": ["a", 3]}, "topics", "must be a list of strings"),
    ({"topics": [f"t{i}" for i in range(51)]}, "topics", "holds 51 tags; the limit is 50"),
    ({"topics": ["a", "a"]}, "topics", "must not hold the same tag twice"),
    ({"topics": ["y" * 201]}, "topics", "longer than 200 characters"),
    ({"days": ["sun"]}, "days", "Days (days) may only hold ['mon', 'tue'], not ['sun']"),
    ({"days": "mon"}, "days", "must be a list of strings"),
    ({"days": ["mon", "mon"]}, "days", "must not hold the same choice twice"),
    # One bad value refuses the whole change: the valid model is not applied either.
    ({"model": "large", "temperature": 5}, "temperature", "must be at most 1"),
]


async def test_invalid_changes_are_refused_naming_the_input_and_change_nothing(
    settings_server: Any, make_user: Any
) -> None:
    client, thread_id = await started_thread(settings_server, make_user())
    for change, setting, message in BAD_CHANGES:
        answer = await client.call("chat_settings_change", change)
        assert isinstance(answer, dict), change
        assert answer["setting"] == setting, change
        assert message in answer["error"], (change, answer)
    not_an_object = await client.call("chat_settings_change", ["model", "large"])
    assert "JSON object" in not_an_object["error"]
    await settle()
    thread = await thread_row(thread_id)
    assert thread.chat_settings == INITIAL
    assert thread.metadata["updates"] == []
    await client.send("unchanged")
    await client.wait_text(f"[{READY.removeprefix('Ready with ')}] unchanged")
    await client.disconnect()


async def test_a_reconnect_and_a_resume_show_the_panel_with_the_saved_values(
    settings_server: Any, make_user: Any
) -> None:
    user = make_user()
    client, thread_id = await started_thread(settings_server, user)
    change = {"stream": False, "persona": "terse", "max_words": 20}
    assert await client.call("chat_settings_change", change) is None
    saved = {**INITIAL, **change}
    await wait_until_async(lambda: _has_settings(thread_id, saved))

    # A reload: the same session reconnects; the app does not declare again, the server shows it.
    await client.disconnect()
    client.events.clear()
    await client.start(thread_id=thread_id)
    [payload] = await client.wait_event("chat_settings")
    assert values(payload) == saved
    await client.disconnect()

    # A resume in a new session (another tab, or after the session expired).
    other = await signed_in(settings_server, user)
    await other.start(thread_id=thread_id)
    await other.wait_event("resume_thread")
    [payload] = await other.wait_event("chat_settings")
    assert values(payload) == saved
    assert [name for name, _ in other.events].index("resume_thread") < [
        name for name, _ in other.events
    ].index("chat_settings")
    assert READY not in other.texts()  # on_chat_start did not run again
    # The restored declaration still validates changes, and the values reach the hooks.
    refused = await other.call("chat_settings_change", {"max_words": 5000})
    assert refused["setting"] == "max_words"
    await other.send("after resume")
    await other.wait_text(
        "[model=small stream=False temperature=0.5 persona=terse max_words=20 topics=news] after resume"
    )
    assert await other.call("chat_settings_change", {"model": "large"}) is None
    await wait_until_async(lambda: _has_settings(thread_id, {**saved, "model": "large"}))
    await other.disconnect()


async def _has_settings(thread_id: str, expected: dict[str, Any]) -> bool:
    return bool((await thread_row(thread_id)).chat_settings == expected)


async def test_history_api_and_the_owner_check(settings_server: Any, make_user: Any) -> None:
    """The thread read by its owner carries the settings and their inputs in its metadata;
    another user cannot resume it (and so cannot read or change them)."""
    owner = make_user()
    client, thread_id = await started_thread(settings_server, owner)
    await client.disconnect()
    stranger = await signed_in(settings_server, make_user())
    url = f"{settings_server.url}/api/threads/{thread_id}/"
    async with aiohttp.ClientSession() as http:
        async with http.get(url, headers={"Cookie": client.cookie or ""}) as response:
            assert response.status == 200
            metadata = (await response.json())["metadata"]
        async with http.get(url, headers={"Cookie": stranger.cookie or ""}) as response:
            assert response.status == 404
    assert metadata["chat_settings"] == INITIAL
    assert [spec["type"] for spec in metadata["chat_settings_inputs"]][:2] == ["select", "switch"]
    refusal = await stranger.refused(
        {"sessionId": stranger.session_id, "threadId": thread_id, "clientType": "webapp"}
    )
    assert "authorization failed" in str(refusal)


async def test_an_app_that_declares_no_settings_keeps_the_unchecked_merge(
    server: Any, make_user: Any
) -> None:
    """Backwards compatible: no panel is sent, and any storable object is still taken (the
    lifecycle test app declares nothing)."""
    client = await signed_in(server, make_user())
    await client.start()
    await client.wait_event("task_end")
    assert await client.call("chat_settings_change", {"anything": [1, {"x": "y"}]}) is None
    await settle()
    assert client.named("chat_settings") == []
    await client.disconnect()


@pytest.fixture
def number_app(settings: Any) -> None:
    """``tests.apps.number_settings_app`` on the in-memory channel layer, in this process."""
    settings.CHAT_APP = "tests.apps.number_settings_app"
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


# Numbers as a client may write them (``json`` reads 1e999 as infinity, NaN as NaN; an
# integer of over 100 digits, which no float holds, is refused with the frame).
FLOAT_EDGES = [
    ("1e308", "is too large for a step of 0.5"),  # 2e308 steps: round() overflowed
    ("-1.7e308", "is too large for a step of 0.5"),
    ("1e999", "must be a number"),
    ("-Infinity", "must be a number"),
    ("NaN", "must be a number"),
    ("0.3", "must be a multiple of 0.5 from 0"),
]


async def test_float_edge_cases_are_refused_as_bad_input_naming_the_setting(
    number_app: Any, make_user: Any
) -> None:
    user = make_user()
    async with in_process_socket(await session_cookie(user)) as sock:
        await sock.connect_namespace()
        await sock.send_event("connection_successful")
        await sock.event("chat_settings")
        await sock.event("task_end")
        for ack_id, (number, reason) in enumerate(FLOAT_EDGES, start=1):
            await sock.send_text(f'42{ack_id}["chat_settings_change",{{"nb":{number}}}]')
            [answer] = await sock.ack(ack_id)
            assert answer == {"error": f"Number (nb) {reason}", "setting": "nb"}, number
        assert not [frame for frame in sock.frames if "internal server error" in frame]
        assert await sock.call("chat_settings_change", {"nb": 1e300}, ack_id=50) is None
        await sock.send_text('4251["chat_settings_change",{"nb":1' + "0" * 99 + "}]")  # an int of 1e99
        assert await sock.ack(51) == [None]
        assert await sock.call("chat_settings_change", {"nb": -2.5}, ack_id=52) is None
