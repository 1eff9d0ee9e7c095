"""The turn claim's two statements, written once as SQL instead of built by the ORM per turn.

Every turn claims its session (``turns.claim_turn``) and releases it; built through the ORM,
the claim's filter (the lease rule of ``processes.claimable`` with its subquery of live
processes) cost more CPU than any other statement of a turn (issue 22). The SQL here is the
same rule, quoted for the connection's database, with parameters adapted by the model fields
themselves, so SQLite and PostgreSQL keep working alike; PostgreSQL prepares them once per
connection (``threads_app.prepared``).

The claim bumps the session's fencing token (``turn_epoch``) and returns it in the same
statement (``RETURNING``); the release, and the outcome recorded with it, happen only under
that token (``threads_app.fencing``), so a process whose turn was taken over while it
stalled records nothing when it wakes.
"""

import functools
import uuid
from typing import Any

from django.db import connection
from django.utils import timezone

from sessions_app.models import ServerProcess, SocketSession
from sessions_app.processes import dead_cutoff
from threads_app import prepared, send_inserts
from threads_app.fencing import Fence, Fenced
from threads_app.models import AcceptedMessage
from threads_app.services import settle_sends


@functools.cache
def _sql(vendor: str) -> tuple[str, str]:
    """(claim, release) for ``vendor``, quoted by its backend."""
    session = SocketSession._meta  # noqa: SLF001
    process = ServerProcess._meta  # noqa: SLF001

    def q(name: str | None) -> str:
        assert name is not None
        return connection.ops.quote_name(name)

    table, pk = q(session.db_table), q(session.pk.column)
    owner = q(session.get_field("turn_owner").column)
    heartbeat = q(session.get_field("turn_heartbeat").column)
    epoch = q(session.get_field("turn_epoch").column)
    live = (
        f"SELECT {q(process.get_field('address').column)} FROM {q(process.db_table)} "
        f"WHERE {q(process.get_field('heartbeat_at').column)} >= %s"
    )
    claim = (
        f"UPDATE {table} SET {owner} = %s, {heartbeat} = %s, {epoch} = {epoch} + 1 "
        f"WHERE {pk} = %s AND ({owner} = '' OR {owner} NOT IN ({live}))"
    )
    release = f"UPDATE {table} SET {owner} = '', {heartbeat} = NULL WHERE {pk} = %s AND {owner} = %s"
    return claim, release


@functools.cache
def _epoch_column() -> str:
    return connection.ops.quote_name(str(SocketSession._meta.get_field("turn_epoch").column))  # noqa: SLF001


@functools.cache
def _settling_release() -> str:
    """The release with the outcome of the turn's send, one statement (PostgreSQL: data-
    modifying CTEs): the outcome is recorded only when the release, under the claim's token,
    happened; the statement returns whether it did."""
    accepted = AcceptedMessage._meta  # noqa: SLF001
    q = connection.ops.quote_name
    release = f"{_sql(connection.vendor)[1]} AND {_epoch_column()} = %s RETURNING 1"
    settle = (
        f"UPDATE {q(accepted.db_table)} SET {q('outcome')} = %s, {q('holder')} = '' "
        f"WHERE {q('id')} = %s AND {q('outcome')} = '' AND EXISTS (SELECT 1 FROM released)"
    )
    return f"WITH released AS ({release}), settled AS ({settle}) SELECT count(*) FROM released"


def _session_pk(session_id: uuid.UUID) -> Any:
    return SocketSession._meta.pk.get_db_prep_value(session_id, connection)  # noqa: SLF001


def _moment(value: object) -> Any:
    return SocketSession._meta.get_field("turn_heartbeat").get_db_prep_value(value, connection)  # noqa: SLF001


def claim(session_id: uuid.UUID, owner: str) -> int:
    """Take the session's turn for ``owner`` when nobody holds it or its holder is dead:
    the claim's fencing token (1 or more), or 0 when it was not taken."""
    now = timezone.now()
    cutoff = dead_cutoff()
    with prepared.cursor() as cursor:
        cursor.execute(
            f"{_sql(connection.vendor)[0]} RETURNING {_epoch_column()}",
            [owner, _moment(now), _session_pk(session_id), _moment(cutoff)],
        )
        row = cursor.fetchone()
    return int(row[0]) if row else 0


@functools.cache
def _accepting_claim(insert: str) -> str:
    """``insert`` (a send's, ``send_inserts``) and the turn's claim, made only when the insert
    made the row: one statement on PostgreSQL, which says what each of them did."""
    claim = _sql(connection.vendor)[0]
    return (
        f"WITH inserted AS ({insert} RETURNING 1), "
        f"claimed AS ({claim} AND EXISTS (SELECT 1 FROM inserted) RETURNING {_epoch_column()}) "
        "SELECT (SELECT count(*) FROM inserted), (SELECT max(e.turn_epoch) FROM claimed e)"
    )


def accept_claiming(owner: str, **send: Any) -> tuple[AcceptedMessage | None, int]:
    """Insert the send (``send``: its fields, as ``send_inserts.insert_statement`` takes them)
    and, when that made its row, claim the turn of its session (``session_id``) for ``owner``: ``(the row, or None
    when its key was taken; the claim's token, 0 when not claimed)``. One statement and one commit on PostgreSQL (two on
    other databases). The row commits whether or not the claim is won, as when they were
    two statements: a send is accepted even when another process holds the turn."""
    session_id: uuid.UUID = send["session_id"]
    record, insert, params = send_inserts.insert_statement(**send)
    if connection.vendor != "postgresql":
        with prepared.cursor() as cursor:
            cursor.execute(insert, params)
            made = cursor.rowcount == 1
        return (send_inserts.inserted(record), claim(session_id, owner)) if made else (None, 0)
    now = timezone.now()
    cutoff = dead_cutoff()
    claim_params = [owner, _moment(now), _session_pk(session_id), _moment(cutoff)]
    with prepared.cursor() as cursor:
        cursor.execute(_accepting_claim(insert), [*params, *claim_params])
        made, epoch = cursor.fetchone()
    return (send_inserts.inserted(record), int(epoch or 0)) if made else (None, 0)


def release(
    session_id: uuid.UUID, owner: str, settle: tuple[uuid.UUID, str] | None = None, *, epoch: int = 0
) -> bool:
    """Give the turn back, if ``owner`` still holds it (under ``epoch``, its token, when
    given); ``settle``: (send, outcome), the outcome of the send the turn answered, recorded
    by the same statement on PostgreSQL (one commit instead of two; ``services.settle_sends``
    on other databases), only while the claim holds. False: the claim was no longer this
    owner's (taken over), and nothing was written."""
    session = _session_pk(session_id)
    if settle is not None and (connection.vendor != "postgresql" or not epoch):
        fence = Fence(SocketSession, session_id, "turn_owner", "turn_epoch", owner, epoch) if epoch else None
        try:
            settle_sends([settle[0]], settle[1], fence=fence)
        except Fenced:
            return False
        settle = None
    with prepared.cursor() as cursor:
        if settle is None:
            held = f" AND {_epoch_column()} = %s" if epoch else ""
            cursor.execute(_sql(connection.vendor)[1] + held, [session, owner, *([epoch] if epoch else [])])
        else:
            send = AcceptedMessage._meta.get_field("id").get_db_prep_value(settle[0], connection)  # noqa: SLF001
            cursor.execute(_settling_release(), [session, owner, epoch, settle[1], send])
            return bool(cursor.fetchone()[0])
        return bool(cursor.rowcount == 1)
