"""Resuming a thread over a real socket: the page a client asks for (auth ``resumeSteps``),
the byte budget a client that does not ask gets, the chat context rebuilt within its own
budget, and the step budget on what a hooks app sends and streams."""

import json
import uuid

import pytest
from asgiref.sync import sync_to_async

from tests.support.client import signed_in
from threads_app.models import Step, Thread

pytestmark = pytest.mark.django_db(transaction=True)

STEP_MAX_BYTES = 1000
RESUME_MAX_BYTES = 20_000


@pytest.fixture(scope="module")
def budget_server(server_factory):
    """The lifecycle app with small budgets, so a test thread crosses them."""
    return server_factory.start(STEP_MAX_BYTES=str(STEP_MAX_BYTES), RESUME_MAX_BYTES=str(RESUME_MAX_BYTES))


@sync_to_async
def thread_of(user, steps: int, size: int = 10) -> Thread:
    from threads_app.services import default_box_for, upsert_step

    thread = Thread.objects.create(owner=user, box=default_box_for(user), name="long chat")
    for i in range(steps):
        kind = "user_message" if i % 2 == 0 else "assistant_message"
        upsert_step(thread.id, uuid.uuid4(), type=kind, name=kind, output=f"line {i} " + "x" * size)
    return thread


@sync_to_async
def stored_outputs(thread_id: str) -> list[str]:
    return list(Step.objects.filter(thread_id=thread_id).order_by("seq").values_list("output", flat=True))


async def test_a_paged_resume_carries_the_last_steps_and_a_cursor_and_the_context_stays_whole(
    server, make_user
):
    user = make_user()
    thread = await thread_of(user, 30)
    client = await signed_in(server, user)
    await client.start(thread_id=str(thread.id), resumeSteps=10)
    await client.wait_text("welcome back")
    [resumed] = client.named("resume_thread")
    assert [s["seq"] for s in resumed["steps"]] == list(range(21, 31))
    assert resumed["omittedBeforeSeq"] == 21
    # The context is rebuilt from the transcript within its own budget, not from the page.
    await client.send("ctx")
    await client.wait_for(lambda c: any(t.startswith('{"len"') for t in c.texts()))
    reply = next(t for t in client.texts() if t.startswith('{"len"'))
    assert json.loads(reply)["len"] == 30 + 2  # the history, "welcome back", "ctx" itself
    await client.disconnect()


async def test_a_client_that_does_not_ask_gets_the_whole_thread(server, make_user):
    user = make_user()
    thread = await thread_of(user, 30)
    client = await signed_in(server, user)
    await client.start(thread_id=str(thread.id))
    await client.wait_text("welcome back")
    [resumed] = client.named("resume_thread")
    assert len(resumed["steps"]) == 30 and resumed["omittedBeforeSeq"] is None
    await client.disconnect()


@pytest.mark.parametrize("bad", [0, 1001, "10", True, 2.5])
async def test_a_bad_resume_steps_is_refused_with_the_reason(server, make_user, bad):
    client = await signed_in(server, make_user())
    error = await client.refused({"sessionId": str(uuid.uuid4()), "resumeSteps": bad})
    assert "resumeSteps must be an integer from 1 to 1000" in str(error)


async def test_a_resume_within_its_byte_budget_carries_the_newest_steps(budget_server, make_user):
    user = make_user()
    thread = await thread_of(user, 60, size=900)  # about 1.3 KB a step as JSON: 78 KB in all
    client = await signed_in(budget_server, user)
    await client.start(thread_id=str(thread.id))
    await client.wait_text("welcome back")
    [resumed] = client.named("resume_thread")
    assert len(json.dumps(resumed, separators=(",", ":"))) <= RESUME_MAX_BYTES
    seqs = [s["seq"] for s in resumed["steps"]]
    assert seqs == list(range(seqs[0], 61)) and resumed["omittedBeforeSeq"] == seqs[0] > 1
    await client.disconnect()


async def test_a_reply_and_a_stream_past_the_step_budget_are_cut_with_a_marker(budget_server, make_user):
    client = await signed_in(budget_server, make_user())
    await client.start()
    await client.wait_text("greeting")
    await client.send("stream 400")  # "t0 t1 ... t399 ": about 1.9 KB
    await client.wait_for(lambda c: any("[truncated" in m["output"] for m in c.named("update_message")))
    streamed = "".join(t["token"] for t in client.named("stream_token"))
    assert len(streamed.encode()) <= STEP_MAX_BYTES and streamed.endswith(
        "over the limit of 1000 bytes a step]"
    )
    assert streamed.count("[truncated") == 1
    await client.send("y" * 3000)  # a message over the budget (never with the defaults)
    await client.wait_for(lambda c: any(t.startswith("echo: y") for t in c.texts()))
    # The app answers what the transcript kept of it, marker included.
    echo = next(t for t in client.texts() if t.startswith("echo: y"))
    assert echo.endswith("[truncated: 3000 bytes, over the limit of 1000 bytes a step]")
    outputs = await stored_outputs(client.named("first_interaction")[0]["thread_id"])
    assert all(len(o.encode()) <= STEP_MAX_BYTES for o in outputs)
    assert echo in outputs and echo.removeprefix("echo: ") in outputs
    assert streamed in outputs  # what was streamed is what was kept
    await client.disconnect()
