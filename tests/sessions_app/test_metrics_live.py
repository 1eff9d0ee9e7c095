"""What a turn moves on ``/metrics`` (sessions_app.metrics), read back from real daphnes: one
process, and two sharing a multiprocess directory, where either answers for both and a
stopped one's live gauges leave. And the JSON log lines of a turn (``LOG_FORMAT=json``): each
parses, and each line the turn wrote carries its process, session, thread, turn and send ids,
the app's own ``logging`` calls in ``on_message`` included."""

import asyncio
import json
import uuid

import aiohttp
import pytest

from tests.support.client import ChatClient, api_token, user_cookie
from tests.support.metrics import Scrape, scrape
from tests.support.offset_client import OffsetClient
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.django_db(transaction=True)]

HOOKS = {"kind": "hooks"}


@pytest.fixture(scope="module")
def json_server(server_factory, tmp_path_factory):
    """One daphne of its own (the counters start at zero), logging JSON at INFO."""
    return server_factory.start(LOG_FORMAT="json", LOG_LEVEL="INFO")


def ended_after(client: ChatClient, start: int) -> bool:
    return any(name == "task_end" for name, _data in client.events[start:])


async def start(client: ChatClient) -> None:
    """Connect, and wait for the greeting's turn (``on_chat_start``) to end."""
    await client.start()
    await client.wait_for(lambda c: ended_after(c, 0))


async def one_turn(client: ChatClient, text: str) -> None:
    """Send ``text`` and wait for its turn's task_end (the one after its reply)."""
    answer = await client.send(text)
    assert "error" not in answer, answer
    await client.wait_for(lambda c: _reply_then_end(c, text))


def _reply_then_end(client: ChatClient, text: str) -> bool:
    """The reply to ``text`` came, then a task_end."""
    for index, (name, data) in enumerate(client.events):
        reply = name == "new_message" and isinstance(data, dict) and data.get("type") == "assistant_message"
        if reply and index > _sent_at(client, text) and ended_after(client, index):
            return True
    return False


def _sent_at(client: ChatClient, text: str) -> int:
    for index, (name, data) in enumerate(client.events):
        if name == "new_message" and isinstance(data, dict) and data.get("output") == text:
            return index
    return len(client.events)


async def scraped(url: str) -> Scrape:
    return await asyncio.to_thread(scrape, url)


async def test_a_turn_moves_its_counters_and_histograms(json_server, make_user):
    before = await scraped(json_server.url)
    client = ChatClient(json_server.url, await user_cookie(json_server.url, make_user()))
    await start(client)
    try:
        await one_turn(client, "hello metrics")
        during = await scraped(json_server.url)
    finally:
        await client.disconnect()

    def moved(name: str, **labels: str) -> float:
        return during.value(name, **labels) - before.value(name, **labels)

    evidence = during.text + "\n--- server log ---\n" + json_server.log_path.read_text()[-4000:]
    assert moved("tether_turns_total", kind="hooks", outcome="replied") == 1, evidence
    for histogram in ("accept_to_ack", "accept_to_first_token", "accept_to_task_end"):
        assert moved(f"tether_{histogram}_seconds_count", **HOOKS) == 1, (histogram, evidence)
    # The ack comes before the first token, which comes before task_end.
    ack = moved("tether_accept_to_ack_seconds_sum", **HOOKS)
    first = moved("tether_accept_to_first_token_seconds_sum", **HOOKS)
    end = moved("tether_accept_to_task_end_seconds_sum", **HOOKS)
    assert 0 < ack <= end and 0 < first <= end < 10, (ack, first, end)
    # A hooks-API turn of an idle session: accepted, claimed and transcribed in one trip, the
    # reply and the release in another, the session's persist in a third (or so): a few.
    trips = moved("tether_turn_database_trips_sum", **HOOKS)
    assert moved("tether_turn_database_trips_count", **HOOKS) == 1
    assert 1 <= trips <= 12, (trips, evidence)
    assert during.value("tether_turns_running", **HOOKS) == 0
    assert during.value("tether_turns_queued", **HOOKS) == 0
    assert during.value("tether_sockets_connected") == 1, evidence
    assert during.value("tether_sessions_live") >= 1

    try:
        await wait_until(lambda: scrape(json_server.url).value("tether_sockets_connected") == 0, timeout=10)
    except TimeoutError:
        raise AssertionError(scrape(json_server.url).text) from None


async def test_an_engine_turn_moves_the_engine_kinds_counters(engine_server, make_user):
    before = await scraped(engine_server.url)
    client = ChatClient(engine_server.url, await user_cookie(engine_server.url, make_user()))
    await client.start()
    try:
        answer = await client.send("!slow 0.05\nthree little words")
        assert "error" not in answer, answer
        await client.wait_for(lambda c: any(r.endswith("three little words") for r in c.replies()))
        await client.wait_for(lambda c: ended_after(c, 0))
        during = await scraped(engine_server.url)
    finally:
        await client.disconnect()

    def moved(name: str, **labels: str) -> float:
        return during.value(name, **labels) - before.value(name, **labels)

    engine = {"kind": "engine"}
    assert moved("tether_turns_total", kind="engine", outcome="replied") == 1, during.text
    for histogram in ("accept_to_ack", "accept_to_first_token", "accept_to_task_end"):
        assert moved(f"tether_{histogram}_seconds_count", **engine) == 1, (histogram, during.text)
    # The echo engine waits 0.05 s before each of its words: the first one is 0.05 s in.
    first = moved("tether_accept_to_first_token_seconds_sum", **engine)
    end = moved("tether_accept_to_task_end_seconds_sum", **engine)
    assert 0.05 <= first < end < 10, (first, end)
    assert during.value("tether_engine_runs_open") >= 1, during.text
    # The server is the session's: other tests' turns may still run, or end meanwhile.
    running = (before.value("tether_turns_running", **engine), during.value("tether_turns_running", **engine))
    assert running[1] <= running[0], (running, during.text)


async def test_every_log_line_of_a_turn_is_json_with_its_ids(json_server, make_user):
    client = ChatClient(json_server.url, await user_cookie(json_server.url, make_user()))
    await start(client)
    marker = f"app-line-{uuid.uuid4().hex[:8]}"
    try:
        await one_turn(client, f"log {marker}")
    finally:
        await client.disconnect()

    lines = json_server.log_path.read_text().splitlines()
    parsed = []
    for number, line in enumerate(lines, 1):
        try:
            parsed.append(json.loads(line))
        except ValueError:
            pytest.fail(f"log line {number} is not JSON: {line!r}")
    app_line = next((entry for entry in parsed if entry["message"] == marker), None)
    assert app_line is not None, lines[-20:]
    turn = app_line.get("turn")
    assert turn, app_line
    of_turn = [entry for entry in parsed if entry.get("turn") == turn]
    began = [e for e in of_turn if e["message"].startswith("turn of send") and e["message"].endswith("began")]
    ended = [e for e in of_turn if e["message"].startswith("turn of send") and "ended" in e["message"]]
    assert began and ended, of_turn
    for entry in of_turn:
        assert entry["session"] == client.session_id, entry
        assert entry["thread"] and entry["send"] and entry["process"], entry
        assert entry["process"].startswith(f"{json_server.process.pid}:"), entry
        assert entry["level"] and entry["logger"] and entry["time"], entry
    assert {e["thread"] for e in of_turn} == {app_line["thread"]}
    assert {e["send"] for e in of_turn} == {app_line["send"]}
    assert app_line["logger"] == "tests.app" and app_line["level"] == "WARNING"


@pytest.mark.two_process
async def test_two_processes_report_together_and_a_stopped_one_leaves(server_factory, make_user, tmp_path):
    shared = str(tmp_path / "prometheus")
    first = server_factory.start(PROMETHEUS_MULTIPROC_DIR=shared)
    second = server_factory.start(PROMETHEUS_MULTIPROC_DIR=shared)
    user = make_user()
    clients = []
    for server in (first, second):
        client = ChatClient(server.url, await user_cookie(server.url, user))
        await start(client)
        await one_turn(client, "hello from a process")
        clients.append(client)

    for server in (first, second):  # either process answers for both
        both = await scraped(server.url)
        sockets = {labels["pid"]: value for labels, value in both.series("tether_sockets_connected")}
        assert sockets == {str(first.process.pid): 1, str(second.process.pid): 1}, both.text
        assert both.value("tether_turns_total", kind="hooks", outcome="replied") == 2, both.text
        assert both.value("tether_accept_to_task_end_seconds_count", **HOOKS) == 2, both.text

    await clients[1].disconnect()
    assert second.terminate() == 0
    after = await scraped(first.url)
    left = {labels["pid"] for labels, _value in after.series("tether_sockets_connected")}
    assert left == {str(first.process.pid)}, after.text
    # Its counters still count.
    assert after.value("tether_turns_total", kind="hooks", outcome="replied") == 2, after.text

    # A process killed with SIGKILL cannot say it is gone: the next one to start says it.
    third = server_factory.start(PROMETHEUS_MULTIPROC_DIR=shared)
    client = ChatClient(third.url, await user_cookie(third.url, user))
    await start(client)
    killed = str(third.process.pid)
    third.kill()
    await client.disconnect()
    still = {
        labels["pid"] for labels, _value in (await scraped(first.url)).series("tether_sockets_connected")
    }
    assert killed in still  # nobody has noticed yet
    third.restart()

    def pids() -> set[str]:
        return {labels["pid"] for labels, _value in scrape(first.url).series("tether_sockets_connected")}

    try:
        await wait_until(lambda: killed not in pids(), timeout=10)
    except TimeoutError:
        raise AssertionError((killed, scrape(first.url).text)) from None
    assert str(first.process.pid) in pids()
    await clients[0].disconnect()


async def test_engine_sends_waiting_behind_a_turn_are_counted_queued(server_factory, make_user, tmp_path):
    """``tether_turns_queued{kind="engine"}``: the sends a ChatSession holds behind its turn
    in flight, and none once the queue drained into the next turn."""
    server = server_factory.start(CHAT_APP="sessions_app.default_app", ECHO_STATE_DIR=str(tmp_path / "echo"))
    client = ChatClient(server.url, await user_cookie(server.url, make_user()))
    await client.start()
    try:
        answer = await client.send("!slow 0.4\none two three four five six seven eight")
        assert "error" not in answer, answer
        await client.wait_for(lambda c: any(n == "stream_start" for n, _ in c.events))
        for text in ("queued one", "queued two"):
            queued = await client.send(text)
            assert queued.get("queued") is True, queued
        during = await scraped(server.url)
        assert during.value("tether_turns_queued", kind="engine") == 2, during.text
        assert during.value("tether_turns_running", kind="engine") == 1, during.text
        await client.wait_for(lambda c: any("queued two" in r for r in c.replies()), timeout=30)
        await wait_until(
            lambda: scrape(server.url).value("tether_turns_running", kind="engine") == 0, timeout=10
        )
        after = await scraped(server.url)
    finally:
        await client.disconnect()
    assert after.value("tether_turns_queued", kind="engine") == 0, after.text
    # The two queued sends were merged into one turn after the first.
    assert after.value("tether_turns_total", kind="engine", outcome="replied") == 2, after.text


async def test_api_requests_a_budget_refuses_are_counted(server_factory, make_user):
    """``tether_budget_refusals_total{via="http"}``: a search over the budget (DRF's throttle)
    and a send's repeat the ASGI gate answers before Django, beside the socket's refusals."""
    server = server_factory.start(SEARCHES_THROTTLE_RATE="2/min", SEND_THROTTLE_RATE="1/min")
    user = make_user()
    cookie = await user_cookie(server.url, user)
    token = await api_token(user)
    statuses = []
    async with aiohttp.ClientSession() as http:
        for _ in range(3):
            async with http.get(f"{server.url}/api/threads/?search=word", headers={"Cookie": cookie}) as r:
                statuses.append(r.status)
        for number in range(3):
            body = {"message": f"send {number}", "threadId": str(uuid.uuid4())}
            async with http.post(
                f"{server.url}/api/chat/send", json=body, headers={"Authorization": f"Token {token}"}
            ) as r:
                statuses.append(r.status)
    assert statuses[:3] == [200, 200, 429] and statuses[4:] == [429, 429], statuses
    counted = await scraped(server.url)
    assert counted.value("tether_budget_refusals_total", budget="searches", via="http") == 1, counted.text
    # The first refused send went through DRF, its repeat was answered by the gate.
    assert counted.value("tether_budget_refusals_total", budget="sends", via="http") == 1, counted.text
    assert counted.value("tether_budget_refusals_total", budget="repeat", via="http") == 1, counted.text
    assert counted.value("tether_budget_refusals_total", via="socket") == 0, counted.text


async def test_a_replay_counts_the_window_it_read_and_the_events_it_sent(server_factory, make_user):
    """``tether_event_log_window_events`` and ``tether_replayed_events``: a reconnect that
    asks for what came after an earlier offset is sent those events, from a window that
    held all of the session's."""
    server = server_factory.start()
    client = OffsetClient(server.url, await user_cookie(server.url, make_user()))
    await client.connect()
    await client.wait(lambda: any(event == "task_end" for event, _data, _offset in client.events))
    answer = await client.send("stream 5")
    assert "error" not in answer, answer
    await client.wait(lambda: sum(1 for event, _d, _o in client.events if event == "task_end") >= 2)
    await client.close()
    latest = int(client.offset or 0)
    assert latest > 5, client.events
    before = await scraped(server.url)
    client.offset = str(latest - 3)  # as if the last three events never arrived
    seen = len(client.events)
    await client.connect()
    try:
        assert client.recoveries[-1]["recovered"] is True, client.recoveries
        # What the server sends from the window: everything after the offset the client
        # gave (the session is idle: nothing comes live meanwhile).
        await client.wait(lambda: any(o == latest for _e, _d, o in client.events[seen:]))
        await asyncio.sleep(0.5)
        replayed = [o for _e, _d, o in client.events[seen:] if o is not None]
        after = await scraped(server.url)
    finally:
        await client.close()

    def moved(name: str) -> float:
        return after.value(name) - before.value(name)

    # The window held every event of the session (1 to its newest, well under its size);
    # the replay sent those after the offset given: at least the three, and the client got
    # them (and maybe live ones after).
    sent = moved("tether_replayed_events_sum")
    assert moved("tether_replayed_events_count") == 1, after.text
    assert 3 <= sent <= len(replayed), (latest, sent, replayed)
    assert replayed[: int(sent)] == list(range(latest - 2, latest - 2 + int(sent))), (latest, sent, replayed)
    assert moved("tether_event_log_window_events_count") == 1, after.text
    assert moved("tether_event_log_window_events_sum") == latest - 3 + sent, (latest, sent, after.text)
