"""Appending a new transcript step in one round trip (PostgreSQL).

A step's ``seq`` is the thread's ``last_seq`` plus one. Handing it out with the ORM takes a
transaction of four statements (lock the thread, look for the step, bump ``last_seq``, insert).
On PostgreSQL one statement does all of it: a ``FOR UPDATE`` read of the thread (which, when
another writer holds the row, waits and then sees that writer's committed ``last_seq``), an
``INSERT ... ON CONFLICT (id) DO NOTHING`` with the next seq, and an ``UPDATE`` of the thread
that only happens when the insert did. A step id that already exists inserts nothing, moves
nothing and returns ``None``: the caller updates the existing row instead. The sends a user
step transcribes can be marked in the same statement (with the ``queued`` answer of those
sent to a ready run, ``chats.submit_here``); the sends a turn's last step answers can have
their outcome recorded in it (``settles``: an engine turn's reply with its outcome, so a
send never has an outcome without the step that answered it). The thread's ``text_bytes`` grows by the
step's text in the same ``UPDATE``, and a step that would take it past the thread's budget
inserts nothing either (``None``: the caller's path fits it to what is left).

A write made under a claim (a ``fencing.Fence``) reads the thread only while the claim is
current, in the same statement: a stale claim inserts nothing and raises ``Fenced``, and the
step records its writer and the claim's token (``Step.writer``, ``writer_epoch``).

The sends are named by a list of placeholders, one per send (``id IN (%s, %s)``), not by an
array (``id = ANY(%s)``): the statement is prepared, and PostgreSQL plans a prepared
statement once for every execution (a generic plan) only when that plan costs no more than the
plans made for the values given. For an array parameter it guesses ten elements, so the
generic plan of the user step (a bitmap scan of ten sends) always lost to the custom one (an
index lookup of one) and the statement was planned again on every execution: a third of a
millisecond of PostgreSQL's CPU per turn (issue 22, ``pg_stat_statements``: 443 plans for
433 executions). A list of placeholders says how many sends there are; a turn names one
send almost always, so a connection prepares a statement or two per shape.

Other databases (SQLite, the embedded default) return ``None`` at once and the caller takes
the ORM path; their writes are serialised anyway.
"""

import functools
import uuid
from collections.abc import Sequence
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.utils import timezone

from threads_app import prepared
from threads_app.column_values import Columns
from threads_app.fencing import Fence, Fenced
from threads_app.models import AcceptedMessage, Step, Thread

# ``_meta`` is Django's documented Model _meta API, not a private member.
_INSERTED_COLUMNS = Columns([f for f in Step._meta.concrete_fields if f.column != "seq"])  # noqa: SLF001


def _placeholders(count: int) -> str:
    return ", ".join(["%s"] * count)


@functools.cache
def _sql(marks: int, fence: str = "", settles: int = 0) -> str:
    """The statement for a step that transcribes ``marks`` sends and settles ``settles``
    (0: none), under ``fence`` (its SQL condition, or none)."""
    step, thread, accepted = (m._meta.db_table for m in (Step, Thread, AcceptedMessage))  # noqa: SLF001
    columns = ", ".join(connection.ops.quote_name(str(f.column)) for f in _INSERTED_COLUMNS)
    values = ", ".join("%s" for _ in _INSERTED_COLUMNS)
    # ``queued`` keeps its array (it may be empty): in the SET list it does not sway the plan.
    marked = (
        f""", marked AS (
            UPDATE {accepted} SET state = %s, step_id = inserted.id,
                queued = CASE WHEN {accepted}.id = ANY(%s) THEN COALESCE({accepted}.queued, false)
                         ELSE {accepted}.queued END
            FROM inserted WHERE {accepted}.id IN ({_placeholders(marks)})
        )"""
        if marks
        else ""
    )
    settled = (
        f""", settled AS (
            UPDATE {accepted} SET outcome = %s, holder = ''
            FROM inserted WHERE {accepted}.id IN ({_placeholders(settles)}) AND {accepted}.outcome = ''
        )"""
        if settles
        else ""
    )
    return f"""
        WITH locked AS (
            SELECT last_seq, text_bytes FROM {thread} WHERE id = %s{f" AND {fence}" if fence else ""} FOR UPDATE
        ), inserted AS (
            INSERT INTO {step} ({columns}, seq)
            SELECT {values}, locked.last_seq + 1 FROM locked WHERE locked.text_bytes + %s <= %s
            ON CONFLICT (id) DO NOTHING
            RETURNING id, seq
        ), bumped AS (
            UPDATE {thread} SET last_seq = inserted.seq, text_bytes = {thread}.text_bytes + %s, updated_at = %s
            FROM inserted WHERE {thread}.id = %s
        ){marked}{settled}
        SELECT (SELECT seq FROM inserted), (SELECT count(*) FROM locked)
    """


def append_step(
    thread_id: uuid.UUID,
    step_id: uuid.UUID,
    fields: dict[str, Any],
    *,
    transcribes: Sequence[uuid.UUID] = (),
    unqueued: Sequence[uuid.UUID] = (),
    text_bytes: int = 0,
    thread_budget: int,
    fence: Fence | None = None,
    settles: tuple[Sequence[uuid.UUID], str] | None = None,
) -> int | None:
    """Insert the step with the next seq and return it; ``None`` when the id exists already,
    when its ``text_bytes`` would take the thread past ``thread_budget``, or when the database
    is not PostgreSQL. ``transcribes``: accepted sends this step records, marked transcribed
    by the same statement; ``unqueued``: those of them whose ``queued`` is recorded as False
    there, when it is not recorded yet. ``fence``: the claim the step is written under;
    raises ``Fenced`` when it is no longer current. ``settles``: (sends, outcome), recorded
    by the same statement only when it inserted the step (on ``None`` nothing was settled)."""
    if connection.vendor != "postgresql":
        return None
    row = {**fields, "id": step_id, "thread_id": thread_id}
    params: list[Any] = [thread_id]
    fence_sql = ""
    if fence is not None:
        # The thread's own claim is read for update: the statement locks that row so anyway.
        fence_sql, fence_params = fence.sql(exclusive=fence.model is Thread and fence.pk == thread_id)
        params += fence_params
    params += _INSERTED_COLUMNS.db_values(
        [row[f.attname] if f.attname in row else f.get_default() for f in _INSERTED_COLUMNS],
        connections[DEFAULT_DB_ALIAS],
    )
    params += [text_bytes, thread_budget, text_bytes, timezone.now(), thread_id]
    if transcribes:
        params += [AcceptedMessage.State.TRANSCRIBED, list(unqueued), *transcribes]
    settled: list[uuid.UUID] = []
    if settles is not None and settles[0]:
        settled = list(settles[0])
        params += [settles[1], *settled]
    with prepared.cursor() as cursor:
        cursor.execute(_sql(len(transcribes), fence_sql, len(settled)), params)
        seq, locked = cursor.fetchone()
    if fence is not None and not locked:
        raise Fenced(fence, f"step {step_id}")
    return int(seq) if seq is not None else None
