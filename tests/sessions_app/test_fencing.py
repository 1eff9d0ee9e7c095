"""Fencing tokens (``threads_app.fencing``): every claim that changes hands bumps its token,
and a write made under a token that is no longer current writes nothing and raises
``Fenced``, whatever the write (a new step, an updated step, a tool result, a send's outcome,
the engine's session id, a turn's release, a session's saved user session)."""

import json
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from sessions_app import records, turn_statements, webhook_tasks
from sessions_app.models import ServerProcess, SocketSession
from sessions_app.runtime import integration_turns, ownership, transcript
from sessions_app.runtime.thread_session import TurnResponse
from sessions_app.turns import turn_fence
from threads_app import fencing, services
from threads_app.fencing import Fence, Fenced
from threads_app.models import AcceptedMessage, Box, Step, Thread

pytestmark = pytest.mark.django_db


def process(name: str, *, beat_ago: float = 0) -> str:
    address = f"{name}-{uuid.uuid4().hex}"
    ServerProcess.objects.create(
        address=address, pid=1, heartbeat_at=timezone.now() - timedelta(seconds=beat_ago)
    )
    return address


def die(address: str) -> None:
    ServerProcess.objects.filter(address=address).update(heartbeat_at=timezone.now() - timedelta(hours=1))


@pytest.fixture
def thread(make_user) -> Thread:
    user = make_user()
    return Thread.objects.create(owner=user, box=services.default_box_for(user), name="t")


def epoch_of(thread: Thread) -> int:
    return Thread.objects.values_list("runtime_epoch", flat=True).get(pk=thread.pk)


def taken_over(thread: Thread) -> tuple[Fence, Fence]:
    """A claims the thread, dies, B takes it: (A's fence, B's fence)."""
    a, b = process("a"), process("b")
    assert ownership.claim_thread(thread.pk, a) == a
    stale = transcript.thread_fence(thread.pk, a, epoch_of(thread))
    die(a)
    assert ownership.claim_thread(thread.pk, b) == b
    return stale, transcript.thread_fence(thread.pk, b, epoch_of(thread))


def write(thread: Thread, fence: Fence | None, text: str = "hi") -> Step:
    return services.upsert_step(thread.pk, uuid.uuid4(), type="assistant_message", output=text, fence=fence)


def test_each_claim_that_changes_hands_bumps_the_token(thread):
    a, b = process("a"), process("b")
    assert epoch_of(thread) == 0
    ownership.claim_thread(thread.pk, a)
    assert epoch_of(thread) == 1
    ownership.claim_thread(thread.pk, b)  # A is alive: B does not get it, nothing moves
    assert epoch_of(thread) == 1
    die(a)
    ownership.claim_thread(thread.pk, b)
    assert epoch_of(thread) == 2

    def box_epoch() -> int:
        return Box.objects.values_list("runtime_epoch", flat=True).get(pk=thread.box_id)

    ownership.claim_box(thread.box_id, a)  # A is dead, but the box was free
    assert box_epoch() == 1
    ownership.claim_box(thread.box_id, a)  # renewing its own claim keeps the token
    assert box_epoch() == 1
    ownership.claim_box(thread.box_id, b)
    assert box_epoch() == 2


def test_a_step_under_the_current_token_records_its_writer_and_token(thread):
    _stale, current = taken_over(thread)
    step = write(thread, current)
    row = Step.objects.get(pk=step.pk)
    assert (row.writer, row.writer_epoch) == (current.owner, current.epoch) == (current.owner, 2)
    unfenced = Step.objects.get(pk=write(thread, None).pk)
    assert (unfenced.writer, unfenced.writer_epoch) == ("", None)


def test_a_stale_token_writes_no_step(thread):
    stale, current = taken_over(thread)
    write(thread, current, "the new owner's")
    before = list(Step.objects.filter(thread=thread).values_list("id", "seq", "output"))
    last_seq = Thread.objects.values_list("last_seq", flat=True).get(pk=thread.pk)
    with pytest.raises(Fenced) as refused:
        write(thread, stale, "the old owner's")
    assert refused.value.fence == stale and fencing.is_lost(stale) and not fencing.is_lost(current)
    assert list(Step.objects.filter(thread=thread).values_list("id", "seq", "output")) == before
    assert Thread.objects.values_list("last_seq", flat=True).get(pk=thread.pk) == last_seq


def test_a_stale_token_updates_no_step(thread):
    """The same step id again takes the ORM path (an update): fenced there too."""
    stale, current = taken_over(thread)
    step = write(thread, current, "kept")
    with pytest.raises(Fenced):
        services.upsert_step(thread.pk, step.pk, type="assistant_message", output="overwritten", fence=stale)
    assert Step.objects.get(pk=step.pk).output == "kept"


def test_a_stale_token_finishes_no_tool_step_and_saves_no_engine_session(thread):
    stale, current = taken_over(thread)
    tool = services.upsert_step(thread.pk, uuid.uuid4(), type="tool", output="", fence=current)
    with pytest.raises(Fenced):
        services.finish_tool_step(tool.pk, output="late", is_error=False, fence=stale)
    assert Step.objects.get(pk=tool.pk).output == ""
    with pytest.raises(Fenced):
        services.save_engine_session_id(thread.pk, "old-owner-session", fence=stale)
    services.save_engine_session_id(thread.pk, "new-owner-session", fence=current)
    assert Thread.objects.get(pk=thread.pk).engine_session_id == "new-owner-session"


def _send(thread: Thread, **fields) -> AcceptedMessage:
    client_id = uuid.uuid4()
    return AcceptedMessage.objects.create(
        id=AcceptedMessage.key(thread.pk, client_id),
        client_id=client_id,
        thread=thread,
        box_id=thread.box_id,
        author=thread.owner,
        text="x",
        **{"state": AcceptedMessage.State.TRANSCRIBED, **fields},
    )


def test_a_stale_token_settles_no_send_and_the_user_step_marks_no_send(thread):
    stale, current = taken_over(thread)
    send = _send(thread)
    with pytest.raises(Fenced):
        services.settle_sends([send.pk], "replied", fence=stale)
    assert AcceptedMessage.objects.get(pk=send.pk).outcome == ""
    services.settle_sends([send.pk], "error", fence=current)
    assert AcceptedMessage.objects.get(pk=send.pk).outcome == "error"
    services.settle_sends([send.pk], "replied", fence=current)  # settled already: no-op, no raise
    assert AcceptedMessage.objects.get(pk=send.pk).outcome == "error"

    pending = _send(thread, state=AcceptedMessage.State.PENDING)
    with pytest.raises(Fenced):
        services.transcribe_user_turn(
            thread.pk,
            pending.pk,
            author="u",
            text="x",
            content=[],
            accepted_ids=[pending.pk],
            message_ids=[pending.client_id],
            fence=stale,
        )
    assert AcceptedMessage.objects.get(pk=pending.pk).state == AcceptedMessage.State.PENDING
    assert not Step.objects.filter(pk=pending.pk).exists()


def answer(thread: Thread, send: AcceptedMessage, fence: Fence, step_id: uuid.UUID | None = None) -> Step:
    return services.write_answering_step(
        thread.pk,
        step_id or uuid.uuid4(),
        answers=[send.pk],
        outcome="replied",
        fence=fence,
        type="assistant_message",
        output="the reply",
    )


def outcome_and_replies(send: AcceptedMessage) -> tuple[str, list[str]]:
    replies = Step.objects.filter(thread_id=send.thread_id, type="assistant_message")
    return AcceptedMessage.objects.get(pk=send.pk).outcome, list(replies.values_list("output", flat=True))


@pytest.mark.parametrize("same_step_again", [False, True], ids=["new step", "existing step (ORM path)"])
def test_a_reply_and_its_sends_outcome_are_written_together_or_not_at_all(thread, same_step_again):
    """An engine turn's last write (``write_answering_step``): a stale claim writes neither the
    reply nor the outcome; the current one writes both (recovery never sees an outcome
    without its reply)."""
    stale, current = taken_over(thread)
    send = _send(thread)
    step_id = write(thread, current, "streamed so far").pk if same_step_again else uuid.uuid4()
    before = outcome_and_replies(send)
    with pytest.raises(Fenced):
        answer(thread, send, stale, step_id)
    assert outcome_and_replies(send) == before, outcome_and_replies(send)
    answer(thread, send, current, step_id)
    assert outcome_and_replies(send) == ("replied", ["the reply"]), outcome_and_replies(send)


def test_a_taken_over_turn_releases_and_settles_nothing(thread):
    session = SocketSession.objects.create(id=uuid.uuid4(), user=thread.owner, thread_id=thread.pk)
    send = _send(thread, session_id=session.pk, source=AcceptedMessage.Source.HOOK)
    a, b = process("a"), process("b")
    first = turn_statements.claim(session.pk, a)
    die(a)
    second = turn_statements.claim(session.pk, b)
    assert 0 < first < second
    assert not turn_statements.release(session.pk, a, (send.pk, "replied"), epoch=first)
    assert AcceptedMessage.objects.get(pk=send.pk).outcome == ""
    assert SocketSession.objects.get(pk=session.pk).turn_owner == b

    token = fencing.current.set(turn_fence(session.pk, a, first))
    try:
        with pytest.raises(Fenced):
            records.save_user_session(
                session.pk, thread_id=None, persistable={"n": 1}, chat_profile="", chat_settings={}
            )
        with pytest.raises(Fenced):  # a hook's step, under the turn's claim by default
            services.upsert_step(thread.pk, uuid.uuid4(), type="assistant_message", output="late")
    finally:
        fencing.current.reset(token)
    assert SocketSession.objects.get(pk=session.pk).user_session == {}

    assert turn_statements.release(session.pk, b, (send.pk, "replied"), epoch=second)
    assert AcceptedMessage.objects.get(pk=send.pk).outcome == "replied"
    assert SocketSession.objects.get(pk=session.pk).turn_owner == ""


def test_an_integration_response_is_delivered_once_by_whoever_settles_its_send(thread, own_webhook_queue):
    """A box's owner taken over mid-turn delivers nothing when it comes back; the new owner's
    close is delivered; a second settle of the same send queues no second delivery."""
    Box.objects.filter(pk=thread.box_id).update(webhook_url="https://hooks.example.com/in")
    a, b = process("a"), process("b")

    def box_fence(owner: str) -> Fence:
        epoch = Box.objects.values_list("runtime_epoch", flat=True).get(pk=thread.box_id)
        return Fence(Box, thread.box_id, "runtime_owner", "runtime_epoch", owner, epoch)

    ownership.claim_box(thread.box_id, a)
    stale = box_fence(a)
    die(a)
    ownership.claim_box(thread.box_id, b)
    current = box_fence(b)
    send = _send(thread, source=AcceptedMessage.Source.INTEGRATION)
    reply = TurnResponse("the whole reply", False, "replied")

    def deliveries() -> list[str]:
        return [
            r.args_kwargs["args"][1] for r in DBTaskResult.objects.filter(queue_name=webhook_tasks.queue())
        ]

    with pytest.raises(Fenced):
        integration_turns.settle_and_queue_delivery(thread.box_id, send, "replied", reply, stale)
    assert AcceptedMessage.objects.get(pk=send.pk).outcome == "" and deliveries() == []

    closed = TurnResponse("The server stopped", True, "error")
    assert integration_turns.settle_and_queue_delivery(thread.box_id, send, "error", closed, current)
    assert not integration_turns.settle_and_queue_delivery(thread.box_id, send, "replied", reply, current)
    assert AcceptedMessage.objects.get(pk=send.pk).outcome == "error"
    assert [json.loads(body)["response"]["text"] for body in deliveries()] == ["The server stopped"], (
        deliveries()
    )


@pytest.mark.django_db(transaction=True)
def test_concurrent_steps_of_one_thread_under_its_claim_wait_for_each_other_and_never_deadlock(make_user):
    """Two writers of one thread under its runtime claim (a turn's user step beside the last
    reply): each statement locks the thread row, and the fence's read of the same row must not
    be a share lock that the statement then upgrades, or two writers deadlock."""
    if connection.vendor != "postgresql":
        pytest.skip("row locks are PostgreSQL's")
    user = make_user()
    thread = Thread.objects.create(owner=user, box=services.default_box_for(user), name="t")
    a = process("a")
    assert ownership.claim_thread(thread.pk, a) == a
    fence = transcript.thread_fence(thread.pk, a, epoch_of(thread))
    writers, each = 4, 60

    def writer(n: int) -> list[str]:
        failures = []
        try:
            for i in range(each):
                try:
                    write(thread, fence, f"{n}.{i}")
                except Exception as exc:  # the evidence: every failure
                    failures.append(f"writer {n} step {i}: {type(exc).__name__}: {exc}")
        finally:
            connection.close()
        return failures

    with ThreadPoolExecutor(writers) as pool:
        failures = [f for done in pool.map(writer, range(writers)) for f in done]
    assert not failures, "\n".join(failures)
    seqs = sorted(Step.objects.filter(thread=thread).values_list("seq", flat=True))
    assert seqs == list(range(1, writers * each + 1))
