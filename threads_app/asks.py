"""The records of asks (questions an app waits for) and of a message's action buttons.

An ask is answered once: ``claim_answer`` is one conditional UPDATE on ``state='open'``, so
of two tabs (or processes) answering at once exactly one wins and the other is told the ask
is closed. Closing for any other reason (a timeout, a stop, the session's end) goes through
the same kind of UPDATE, so an answer and a timeout cannot both win either.
"""

import uuid
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from threads_app.models import Ask, Step
from threads_app.wire import iso, step_to_dict


def open_ask(
    *,
    user: User,
    thread_id: uuid.UUID,
    session_id: uuid.UUID,
    step_id: uuid.UUID,
    kind: str,
    spec: dict[str, Any],
    message: dict[str, Any],
    deadline: datetime,
    asker: str = "",
) -> Ask:
    return Ask.objects.create(
        asker=asker,
        user=user,
        thread_id=thread_id,
        session_id=session_id,
        step_id=step_id,
        kind=kind,
        spec=spec,
        message=message,
        deadline=deadline,
    )


def find_open_ask(
    user: User, *, ask_id: uuid.UUID | None = None, step_id: uuid.UUID | None = None
) -> Ask | None:
    """The caller's open ask named by its id (or its question's step id); another user's,
    a closed one and an unknown one are all None."""
    asks = Ask.objects.filter(user=user, state=Ask.State.OPEN)
    if ask_id is not None:
        return asks.filter(pk=ask_id).first()
    if step_id is not None:
        return asks.filter(step_id=step_id).order_by("-created_at").first()
    return None


def claim_answer(ask_id: uuid.UUID, user: User, answer: Any, *, live_askers: Any = None) -> bool:
    """Record ``answer`` if the ask is still open, before its deadline and (given
    ``live_askers``, a subquery of live process addresses) its asker is alive; whether it won."""
    now = timezone.now()
    asks = Ask.objects.filter(pk=ask_id, user=user, state=Ask.State.OPEN, deadline__gt=now)
    if live_askers is not None:
        asks = asks.filter(Q(asker="") | Q(asker__in=live_askers))
    return asks.update(state=Ask.State.ANSWERED, answer=answer, closed_at=now) == 1


def close_orphaned_asks(*, live_askers: Any, unreachable_askers: Any) -> list[Ask]:
    """Cancel the open asks whose asking process is not among ``live_askers`` (nor on another
    channel layer, ``unreachable_askers``): nobody would take their answers. Returns them."""
    with transaction.atomic():
        closing = list(
            Ask.objects.select_for_update()
            .filter(state=Ask.State.OPEN)
            .exclude(asker="")
            .exclude(asker__in=live_askers)
            .exclude(asker__in=unreachable_askers)[:200]
        )
        Ask.objects.filter(pk__in=[a.pk for a in closing], state=Ask.State.OPEN).update(
            state=Ask.State.CANCELLED, closed_at=timezone.now()
        )
    return closing


def close_ask(ask_id: uuid.UUID, state: str) -> bool:
    """Close an open ask without an answer (timed out or cancelled); whether it was open."""
    return (
        Ask.objects.filter(pk=ask_id, state=Ask.State.OPEN).update(state=state, closed_at=timezone.now()) == 1
    )


def close_session_asks(session_id: uuid.UUID) -> list[Ask]:
    """Cancel every open ask of a session (its end); returns the ones it closed."""
    with transaction.atomic():
        closing = list(Ask.objects.select_for_update().filter(session_id=session_id, state=Ask.State.OPEN))
        Ask.objects.filter(pk__in=[a.pk for a in closing]).update(
            state=Ask.State.CANCELLED, closed_at=timezone.now()
        )
    return closing


def purge_asks(older_than: timedelta) -> int:
    """Delete asks whose deadline passed more than ``older_than`` ago (answered or not: the
    question and a text reply are in the transcript; the row only served the wait)."""
    deleted, _ = Ask.objects.filter(deadline__lt=timezone.now() - older_than).delete()
    return deleted


def read_ask(ask_id: uuid.UUID) -> Ask | None:
    return Ask.objects.filter(pk=ask_id).first()


def open_asks_of_thread(user_id: int, thread_id: uuid.UUID) -> list[Ask]:
    """The thread's asks still waiting (deadline not passed), oldest first."""
    return list(
        Ask.objects.filter(
            user_id=user_id, thread_id=thread_id, state=Ask.State.OPEN, deadline__gt=timezone.now()
        ).order_by("created_at")
    )


def ask_event(ask: Ask) -> dict[str, Any]:
    """The ``ask`` event's payload, Chainlit's ``{msg, spec}``; ``spec.timeout`` is what is left
    of the wait (a re-sent ask shows the time remaining); ``askId``, ``deadline`` and the asking
    ``sessionId`` are Tether's."""
    remaining = max(0, int((ask.deadline - timezone.now()).total_seconds() + 0.999))
    return {
        "msg": ask.message,
        "spec": {
            **ask.spec,
            "type": ask.kind,
            "step_id": str(ask.step_id),
            "timeout": remaining,
            "askId": str(ask.pk),
            "deadline": iso(ask.deadline),
        },
        "sessionId": str(ask.session_id),
    }


def thread_ask_events(user_id: int, thread_id: uuid.UUID) -> list[dict[str, Any]]:
    return [ask_event(ask) for ask in open_asks_of_thread(user_id, thread_id)]


# --- a message's actions ------------------------------------------------------------------


def find_action(
    user: User, thread_id: uuid.UUID, step_id: uuid.UUID, action_id: str
) -> dict[str, Any] | None:
    """The action ``action_id`` still attached to a message of the caller's live thread."""
    step = (
        Step.objects.filter(
            pk=step_id, thread_id=thread_id, thread__owner=user, thread__deleted_at__isnull=True
        )
        .only("metadata")
        .first()
    )
    if step is None:
        return None
    for action in (step.metadata or {}).get("actions") or []:
        if isinstance(action, dict) and action.get("id") == action_id:
            return action
    return None


def remove_actions(
    thread_id: uuid.UUID, step_id: uuid.UUID, action_ids: set[str] | None = None
) -> dict[str, Any] | None:
    """Take actions (all of them with ``None``) off a message's step; the step's new StepDict,
    or None when none of them was there. The row is locked so that removals from two turns
    never resurrect each other's."""
    with transaction.atomic():
        step = Step.objects.select_for_update().filter(pk=step_id, thread_id=thread_id).first()
        if step is None:
            return None
        actions = (step.metadata or {}).get("actions") or []
        kept = [a for a in actions if action_ids is not None and a.get("id") not in action_ids]
        if len(kept) == len(actions):
            return None
        step.metadata = {**step.metadata, "actions": kept}
        step.save(update_fields=["metadata"])
    return step_to_dict(step)
