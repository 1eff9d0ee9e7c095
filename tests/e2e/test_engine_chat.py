"""The default app end to end: python-socketio client -> daphne -> runtime -> echo subprocess."""

import asyncio

import pytest
from asgiref.sync import sync_to_async

from tests.support.client import signed_in
from threads_app.models import AcceptedMessage, Step

pytestmark = pytest.mark.django_db(transaction=True)


@sync_to_async
def user_steps(thread_id: str) -> list[Step]:
    return list(Step.objects.filter(thread_id=thread_id, type="user_message").order_by("seq"))


async def test_reply_streams_token_by_token_and_a_mid_stream_message_waits_its_turn(
    engine_server_each, make_user
):
    engine_server = engine_server_each  # under daphne and under uvicorn
    client = await signed_in(engine_server, make_user())
    await client.start()
    first = await client.send("!slow 0.05\nthe first message has several words")
    assert first["queued"] is False
    await client.wait_event("stream_token", count=2)
    second = await client.send("second one")
    assert second["queued"] is True
    await client.wait_for(lambda c: len(c.replies()) == 2, timeout=20)
    await client.wait_event("task_end", count=3)  # one from connection_successful, one per turn

    tokens = [t["token"] for t in client.named("stream_token")]
    first_reply, second_reply = client.replies()
    assert first_reply == "Echo #1: the first message has several words"
    assert second_reply == "Echo #2: second one"
    assert "".join(tokens) == first_reply + second_reply
    assert len(tokens) >= 5  # streamed in pieces as it was generated, not delivered whole
    # Turns are bracketed: the second starts after the first ended.
    names = [n for n, _ in client.events if n in ("task_start", "task_end")]
    assert names == ["task_end", "task_start", "task_end", "task_start", "task_end"]
    steps = await user_steps(first["threadId"])
    assert [s.metadata["acceptedIds"] for s in steps] == [[first["messageId"]], [second["messageId"]]]
    await client.disconnect()


async def test_stop_interrupts_the_turn_and_clears_the_queue(engine_server, make_user):
    client = await signed_in(engine_server, make_user())
    await client.start()
    first = await client.send("!slow 0.2\nthis answer will never finish streaming to the end")
    await client.wait_event("stream_token", count=1)
    queued = await client.send("dropped by stop")
    assert queued["queued"] is True
    await client.emit("stop")
    await client.wait_text("Task manually stopped.")
    await asyncio.sleep(1.0)
    # What the user saw of the reply is kept, marked interrupted; the rest never came.
    streamed = "".join(t["token"] for t in client.named("stream_token"))
    (partial,) = [m for m in client.named("update_message") if m["type"] == "assistant_message"]
    assert partial["output"] == streamed and partial["metadata"] == {"interrupted": True}
    assert len(client.named("stream_token")) < 5
    assert [n for n, _ in client.events if n in ("task_start", "task_end")][-1] == "task_end"
    dropped = await AcceptedMessage.objects.aget(client_id=queued["messageId"])
    assert (dropped.state, dropped.failure) == (AcceptedMessage.State.FAILED, "stopped")
    assert client.named("message_failed") == [
        {"threadId": queued["threadId"], "messageId": queued["messageId"], "reason": "stopped"}
    ]
    interrupted = await AcceptedMessage.objects.aget(client_id=first["messageId"])
    assert (interrupted.state, interrupted.outcome) == ("transcribed", "interrupted")
    # The session carries on: the engine resumes its conversation on the next message.
    await client.send("again")
    await client.wait_for(lambda c: c.replies()[1:] == ["Echo #2: again"], timeout=15)
    assert first["threadId"] == queued["threadId"]
    await client.disconnect()


async def test_the_same_message_id_twice_is_one_acceptance_and_one_step(engine_server, make_user):
    client = await signed_in(engine_server, make_user())
    await client.start()
    answer = await client.send("only once", "6f0a4b8e-3a55-4c54-9a57-9a4f1c3f4e21")
    again = await client.send("only once", "6f0a4b8e-3a55-4c54-9a57-9a4f1c3f4e21")
    assert again["messageId"] == answer["messageId"] and again["threadId"] == answer["threadId"]
    await client.wait_for(lambda c: len(c.replies()) == 1)
    await asyncio.sleep(0.3)
    assert len(client.replies()) == 1
    assert len(await user_steps(answer["threadId"])) == 1
    conflict = await client.call(
        "client_message", {"message": {"id": "6f0a4b8e-3a55-4c54-9a57-9a4f1c3f4e21", "output": "different"}}
    )
    assert "error" in conflict
    await client.disconnect()


async def test_a_resumed_thread_resumes_the_engine_conversation(engine_server_each, make_user):
    engine_server = engine_server_each  # under daphne and under uvicorn
    user = make_user()
    client = await signed_in(engine_server, user)
    await client.start()
    answer = await client.send("remember me")
    await client.wait_for(lambda c: c.replies() == ["Echo #1: remember me"])
    await client.disconnect()

    later = await signed_in(engine_server, user)
    await later.start(thread_id=answer["threadId"])
    await later.wait_event("resume_thread")
    await later.send("back again")
    await later.wait_for(lambda c: c.replies() == ["Echo #2: back again"], timeout=15)
    await later.disconnect()
