"""Every input path a user drives spends from its budget (``threads_app.budgets``), the socket
and HTTP alike, and what a budget refuses is never queued: clicks (``action_call`` and
``POST /api/project/action``), settings changes, ask answers (``ask_answer`` and the ask's
acknowledgement). Plus the per-session bounds that hold within a budget: at most
``MAX_WAITING_CLICKS`` clicks waiting, at most one ``on_settings_update`` waiting (a newer
change supersedes it). In this process (``InProcessSocket``), on both kinds of app."""

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from rest_framework.test import APIClient

from sessions_app.live import MAX_WAITING_CLICKS, live_sessions
from sessions_app.models import SocketSession
from tests.support.client import session_cookie
from tests.support.hook_log import hook_calls
from tests.support.waiting import wait_until
from tests.support.wire import InProcessSocket, decode, in_process_socket, new_auth
from threads_app import budgets

pytestmark = pytest.mark.django_db(transaction=True)

APPS = ["tests.apps.budgets_app", "tests.apps.budgets_engine_app"]
BURST = 3


@pytest.fixture(params=APPS)
def hook_log(request, settings, monkeypatch, tmp_path) -> Iterator[Path]:
    """One of the budget apps on the in-memory channel layer; every budget ``BURST``/min."""
    settings.CHAT_APP = request.param
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    settings.ECHO_STATE_DIR = str(tmp_path / "echo")
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {budget.name: f"{BURST}/min" for budget in budgets.ALL},
    }
    path = tmp_path / "hooks.jsonl"
    monkeypatch.setenv("HOOK_LOG", str(path))
    yield path


def unlimited(settings: Any, name: str) -> None:
    rates = dict(settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"])
    rates[name] = "off"
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}


@pytest.fixture
async def user(hook_log, make_user):
    return make_user()


class Chat:
    """A connected socket whose ``on_chat_start`` has shown its ``count`` button."""

    def __init__(self, sock: InProcessSocket, session_id: str, button: dict[str, Any]) -> None:
        self.sock = sock
        self.session_id = session_id
        self.button = button
        self.next_ack = 100

    async def send(self, event: str, payload: Any) -> int:
        self.next_ack += 1
        await self.sock.send_event(event, payload, ack_id=self.next_ack)
        return self.next_ack

    async def answer(self, ack_id: int) -> Any:
        frame = await self.sock.seen(lambda f: f.startswith(f"43{ack_id}["), timeout=10)
        return decode(frame).data[0]

    async def click(self) -> int:
        return await self.send("action_call", {"action": self.button})


@pytest.fixture
async def chat(user) -> AsyncIterator[Chat]:
    async with opened_chat(user) as opened:
        yield opened


def opened_chat(user: Any, **env: Any) -> Any:
    from contextlib import asynccontextmanager

    @asynccontextmanager
    async def opening() -> AsyncIterator[Chat]:
        async with in_process_socket(await session_cookie(user)) as sock:
            auth = new_auth(userEnv=json.dumps(env))
            await sock.connect_namespace(auth)
            await sock.send_event("connection_successful")
            frame = await sock.expect(
                lambda f: f.startswith("42") and decode(f).data[0] == "new_message" and "buttons" in f
            )
            (action,) = decode(frame).data[1]["metadata"]["actions"]
            yield Chat(sock, auth["sessionId"], {"id": action["id"], "forId": action["forId"]})

    return opening()


def runs(path: Path, session: str, hook: str) -> list[dict[str, Any]]:
    return hook_calls(path, session, hook)


def assert_refused_with_when(answer: Any, what: str) -> None:
    assert isinstance(answer, dict) and f"too many {what}" in answer.get("error", ""), answer
    assert "try again in" in answer["error"] and answer["retryAfter"] >= 1, answer


# --- clicks ---------------------------------------------------------------------------------


async def test_clicks_over_the_socket_and_http_share_one_budget_and_refusals_run_nothing(
    hook_log, user, chat
):
    api = APIClient()
    api.force_authenticate(user)
    post = sync_to_async(api.post)
    body = {"sessionId": chat.session_id, "action": chat.button}
    first = [await chat.answer(await chat.click()) for _ in range(BURST - 1)]
    assert all(a.get("success") for a in first), first
    assert (await post("/api/project/action", body, format="json")).status_code == 200  # the 3rd
    refused = [await chat.answer(await chat.click()) for _ in range(20)]
    for answer in refused:
        assert_refused_with_when(answer, "action clicks")
    over_http = await post("/api/project/action", body, format="json")
    assert over_http.status_code == 429 and int(over_http["Retry-After"]) >= 1
    await wait_until(lambda: len(runs(hook_log, chat.session_id, "click")) == BURST, timeout=10)
    await asyncio.sleep(0.3)
    assert len(runs(hook_log, chat.session_id, "click")) == BURST  # exactly the budget, not 24


async def test_at_most_a_few_clicks_wait_for_their_turn(hook_log, settings, user):
    unlimited(settings, "clicks")
    async with opened_chat(user, sleep=0.5) as chat:
        answers = [await chat.answer(await chat.click()) for _ in range(12)]
        accepted = [a for a in answers if a.get("success")]
        refused = [a for a in answers if "error" in a]
        # One running, MAX_WAITING_CLICKS waiting; the rest are refused before anything is read.
        assert len(accepted) == 1 + MAX_WAITING_CLICKS, answers
        assert all("waiting for their turn" in a["error"] for a in refused), refused
        live = live_sessions.get(uuid.UUID(chat.session_id))
        assert live is not None and live.pending_hooks() == len(accepted)
        await wait_until(lambda: len(runs(hook_log, chat.session_id, "click")) == len(accepted), timeout=10)
        await asyncio.sleep(0.6)
        assert len(runs(hook_log, chat.session_id, "click")) == len(accepted)
        # Once they ran, clicks are taken again.
        assert (await chat.answer(await chat.click())).get("success")
        await wait_until(
            lambda: len(runs(hook_log, chat.session_id, "click")) == len(accepted) + 1, timeout=10
        )


# --- settings changes -------------------------------------------------------------------------


async def test_settings_changes_spend_their_budget_and_a_refused_one_changes_nothing(hook_log, chat):
    answers = [await chat.answer(await chat.send("chat_settings_change", {"n": i})) for i in range(10)]
    assert answers[:BURST] == [None] * BURST
    for answer in answers[BURST:]:
        assert_refused_with_when(answer, "settings changes")
    await wait_until(lambda: runs(hook_log, chat.session_id, "settings"), timeout=10)
    await asyncio.sleep(0.3)
    updates = [c["values"]["n"] for c in runs(hook_log, chat.session_id, "settings")]
    assert 1 <= len(updates) <= BURST and updates[-1] == BURST - 1, updates
    record = await SocketSession.objects.aget(pk=chat.session_id)
    assert record.chat_settings == {"n": BURST - 1}


async def test_a_newer_settings_change_supersedes_one_waiting_for_its_turn(hook_log, settings, chat):
    unlimited(settings, "settings")
    assert await chat.answer(await chat.send("chat_settings_change", {"n": 0, "sleep": 0.5})) is None
    await wait_until(lambda: runs(hook_log, chat.session_id, "settings"), timeout=10)  # it runs
    for i in range(1, 50):  # while it sleeps: one run waits, each change replaces its values
        assert await chat.answer(await chat.send("chat_settings_change", {"n": i, "sleep": 0})) is None
    live = live_sessions.get(uuid.UUID(chat.session_id))
    assert live is not None and live.pending_hooks() == 2  # the running one and one waiting
    await wait_until(lambda: len(runs(hook_log, chat.session_id, "settings")) == 2, timeout=10)
    await asyncio.sleep(0.3)
    assert [c["values"]["n"] for c in runs(hook_log, chat.session_id, "settings")] == [0, 49]


# --- ask answers ----------------------------------------------------------------------------


async def test_ask_answers_and_ask_acks_share_one_budget_and_a_refused_ack_can_come_again(hook_log, user):
    async with opened_chat(user, ask=True) as chat:
        frame = await chat.sock.expect(lambda f: f.startswith("42") and '"ask"' in f[:12], timeout=10)
        ask = decode(frame)
        ask_id = ask.data[1]["spec"]["askId"]
        for _ in range(BURST):  # unknown asks: refused by the ask, each spending from the budget
            answer = await chat.answer(
                await chat.send("ask_answer", {"askId": str(uuid.uuid4()), "answer": {}})
            )
            assert "no open ask" in answer["error"]
        refused = await chat.answer(
            await chat.send("ask_answer", {"askId": ask_id, "answer": {"output": "Ann"}})
        )
        assert_refused_with_when(refused, "answers")
        # The acknowledgement of the ask is an answer too: refused, and the ask stays open.
        await chat.sock.send_text(f"43{ask.id}" + json.dumps([{"output": "Bob"}]))
        error = await chat.sock.event("error")
        assert "too many answers" in error[0]["message"] and error[0]["event"] == "ask"
        assert not any("Hello" in f for f in chat.sock.frames)
        budgets.reset_all()  # the budget refills: the same acknowledgement is taken
        await chat.sock.send_text(f"43{ask.id}" + json.dumps([{"output": "Bob"}]))
        await chat.sock.expect(lambda f: "Hello, Bob!" in f, timeout=10)


# --- edits are sends ---------------------------------------------------------------------------


async def test_an_edit_spends_from_the_send_budget(hook_log, chat):
    for _ in range(BURST):
        await chat.answer(
            await chat.send("edit_message", {"message": {"id": str(uuid.uuid4()), "output": "x"}})
        )
    answer = await chat.answer(
        await chat.send("edit_message", {"message": {"id": str(uuid.uuid4()), "output": "x"}})
    )
    assert_refused_with_when(answer, "messages")


async def test_an_event_name_written_with_escapes_spends_from_its_budget_too(hook_log, chat):
    """The budget is spent before parsing from the name as written; a name with escapes
    cannot be read so, and is admitted once the packet is parsed, from the same budget."""
    frame = json.dumps(["\\u0061ction_call", {"action": chat.button}]).replace("\\\\u", "\\u")
    assert frame.startswith('["\\u0061ction_call"')
    answers = []
    for ack_id in range(500, 500 + BURST + 2):
        await chat.sock.send_text(f"42{ack_id}{frame}")
        answers.append(await chat.answer(ack_id))
    assert all(a.get("success") for a in answers[:BURST]), answers
    for answer in answers[BURST:]:
        assert_refused_with_when(answer, "action clicks")
