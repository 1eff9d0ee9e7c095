"""Writes and reads of session records (``SocketSession``), for the live layer.

The flags that must hold once per session across processes (chat started, resumed, ended,
first interaction) are claimed with a single conditional UPDATE: the caller whose UPDATE
changed a row won and runs the hook; everybody else does nothing.

All functions are synchronous; async code calls them through ``database_sync_to_async``.
"""

import logging
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from sessions_app.models import SocketSession
from sessions_app.processes import held_by_live_process
from threads_app import fencing
from threads_app.services import save_thread_session

logger = logging.getLogger(__name__)

CLAIMABLE_FLAGS = ("chat_started", "resumed", "has_first_interaction")


class SessionNotOwned(Exception):
    """The sessionId belongs to another user's live session."""


@dataclass(frozen=True)
class OpenedSession:
    record: SocketSession
    restored: bool
    previous_channel: str


def open_session(
    session_id: uuid.UUID,
    user: User,
    *,
    channel: str,
    owner: str = "",
    new_fields: dict[str, Any],
) -> OpenedSession:
    """Restore the session ``session_id`` for ``user`` on ``channel``, or create it.

    A restore rebinds the socket and changes nothing else. An ended (cleared or expired)
    record is replaced by a fresh one.
    """
    for _attempt in range(3):
        with transaction.atomic():
            record = SocketSession.objects.select_for_update().filter(pk=session_id).first()
            if record is not None and record.ended:
                record.delete()
                record = None
            if record is not None:
                if record.user_id != user.pk:
                    raise SessionNotOwned(str(session_id))
                previous = record.socket_channel
                record.socket_channel = channel
                record.socket_owner = owner
                record.disconnected_at = None
                record.generation = F("generation") + 1
                record.save(
                    update_fields=[
                        "socket_channel",
                        "socket_owner",
                        "disconnected_at",
                        "generation",
                        "updated_at",
                    ]
                )
                record.refresh_from_db(fields=["generation"])
                return OpenedSession(record, restored=True, previous_channel=previous)
        try:
            with transaction.atomic():
                record = SocketSession.objects.create(
                    id=session_id, user=user, socket_channel=channel, socket_owner=owner, **new_fields
                )
            return OpenedSession(record, restored=False, previous_channel="")
        except IntegrityError:
            continue  # another connect created it first: restore that one
    raise RuntimeError(f"could not open session {session_id}")


def get_session(session_id: uuid.UUID) -> SocketSession | None:
    return SocketSession.objects.filter(pk=session_id).first()


def is_live_session_of(user_pk: int, session_id: uuid.UUID) -> bool:
    """Is ``session_id`` a session of that user that has not ended?"""
    return SocketSession.objects.filter(pk=session_id, user_id=user_pk, ended=False).exists()


def claim_flag(session_id: uuid.UUID, flag: str) -> bool:
    """Set ``flag`` if it is still false; True only for the one caller that set it."""
    if flag not in CLAIMABLE_FLAGS:
        raise ValueError(flag)
    return (
        SocketSession.objects.filter(pk=session_id, ended=False, **{flag: False}).update(**{flag: True}) == 1
    )


def set_fields(session_id: uuid.UUID, **fields: Any) -> None:
    SocketSession.objects.filter(pk=session_id).update(**fields, updated_at=timezone.now())


def mark_disconnected(session_id: uuid.UUID, channel: str) -> bool:
    """Record the drop unless another socket already took the session over."""
    return (
        SocketSession.objects.filter(pk=session_id, socket_channel=channel).update(
            socket_channel="", socket_owner="", disconnected_at=timezone.now()
        )
        == 1
    )


def save_user_session(
    session_id: uuid.UUID,
    *,
    thread_id: uuid.UUID | None,
    persistable: dict[str, Any],
    chat_profile: str,
    chat_settings: dict[str, Any],
) -> None:
    """Write the persistable user session to the record and the thread, in one transaction.

    A reconnect reads either the whole previous save or the whole new one, never a mix. Made
    from a turn, it is made under the turn's claim (``fencing.current``): a turn that was
    taken over saves nothing (``Fenced``).
    """
    fence = fencing.current.get()
    with transaction.atomic():
        saved = fencing.fenced(SocketSession.objects.filter(pk=session_id), fence).update(
            user_session=persistable,
            chat_profile=chat_profile,
            chat_settings=chat_settings,
            updated_at=timezone.now(),
        )
        if not saved and fence is not None:
            raise fencing.Fenced(fence, f"the user session of {session_id}")
        if thread_id is not None:
            save_thread_session(
                thread_id, metadata=persistable, chat_profile=chat_profile, chat_settings=chat_settings
            )


def reattach_sockets(owner: str, channels: dict[uuid.UUID, str]) -> list[uuid.UUID]:
    """Sockets this process still holds (session id -> channel) whose records another process
    detached while it took this one for dead (``detach_dead_sockets``) are attached again.
    Returns the sessions that are no longer these sockets': ended, deleted, or restored on
    another socket meanwhile."""
    found = dict(
        SocketSession.objects.filter(pk__in=list(channels), ended=False).values_list("id", "socket_channel")
    )
    lost = [i for i, channel in channels.items() if found.get(i) not in ("", channel)]
    for session_id in (i for i, channel in found.items() if channel == ""):
        attached = SocketSession.objects.filter(pk=session_id, ended=False, socket_channel="").update(
            socket_channel=channels[session_id], socket_owner=owner, disconnected_at=None
        )
        if not attached:
            lost.append(session_id)
    return lost


def claim_end(session_id: uuid.UUID, *, expired_before: datetime | None = None) -> bool:
    """Claim the right to run ``on_chat_end``. With ``expired_before``, only a session that
    has been disconnected since before that moment can be claimed (expiry)."""
    sessions = SocketSession.objects.filter(pk=session_id, ended=False)
    if expired_before is not None:
        sessions = sessions.filter(socket_channel="", disconnected_at__lte=expired_before)
    return sessions.update(ended=True) == 1


def detach_dead_sockets() -> int:
    """Sessions whose socket belonged to a process that died count as disconnected from now
    on, so they expire (and get ``on_chat_end``) like any other dropped session."""
    return (
        SocketSession.objects.filter(ended=False)
        .exclude(socket_channel="")
        .exclude(held_by_live_process("socket_owner"))
        .update(socket_channel="", socket_owner="", disconnected_at=timezone.now())
    )


def expired_session_ids(timeout_seconds: float) -> list[uuid.UUID]:
    cutoff = timezone.now() - timedelta(seconds=timeout_seconds)
    return list(
        SocketSession.objects.filter(ended=False, socket_channel="", disconnected_at__lte=cutoff).values_list(
            "id", flat=True
        )[:500]
    )


def delete_session(session_id: uuid.UUID) -> None:
    SocketSession.objects.filter(pk=session_id).delete()


def defer_step(session_id: uuid.UUID, step: dict[str, Any]) -> bool:
    """Keep a step sent before the thread exists; it is written on the first interaction.

    Returns False when the session has had its first interaction meanwhile (possibly in
    another process): the caller then writes the step to the thread itself. A session that
    ended before its thread existed has nowhere to keep the step: it is dropped (True).
    """
    with transaction.atomic():
        record = SocketSession.objects.select_for_update().filter(pk=session_id).first()
        if record is None:
            logger.info(
                "session %s ended before its first interaction; step %s dropped", session_id, step["id"]
            )
            return True
        if record.has_first_interaction:
            return False
        steps = [s for s in record.deferred_steps if s["id"] != step["id"]]
        steps.append(step)
        record.deferred_steps = steps
        record.save(update_fields=["deferred_steps"])
        return True


def take_deferred_steps(session_id: uuid.UUID) -> list[dict[str, Any]]:
    with transaction.atomic():
        record = SocketSession.objects.select_for_update().filter(pk=session_id).first()
        if record is None or not record.deferred_steps:
            return []
        steps: list[dict[str, Any]] = record.deferred_steps
        record.deferred_steps = []
        record.save(update_fields=["deferred_steps"])
        return steps


def sessions_showing(thread_id: uuid.UUID) -> list[uuid.UUID]:
    """Live sessions showing a thread right now (connected, past their first interaction)."""
    return list(
        SocketSession.objects.filter(thread_id=thread_id, ended=False, has_first_interaction=True)
        .exclude(socket_channel="")
        .values_list("id", flat=True)
    )
