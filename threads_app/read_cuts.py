"""Where the database cuts a read of the newest steps, so a read within a byte budget is one
statement however long the thread is.

A budgeted read (``transcript_budgets``) measures each StepDict exactly, in Python, and stops
at the first that would pass its budget. Without knowing the steps' sizes beforehand it had to
fetch keyset pages, small first, more as it learned what the rows weigh: a few statements for
a long thread. Instead the first statement carries its own cut: ``cut_seq`` is the seq of the
newest step at which a running sum, newest first, of a lower bound of each step's measure
passes the budget. Every step the exact measure keeps is at or after that seq (the lower
bound passes the budget no later than the measure does), so the statement fetches them all,
plus at most that one step, in one trip; and nothing older, however many steps the thread has.

The lower bound is the bytes of the step's text (``input`` and ``output``) plus
``per_step``: PostgreSQL's ``octet_length`` (which reads the stored size without
decompressing a long value) or SQLite's ``length`` (characters, which is less). A step's JSON
on the wire is at least its text's UTF-8 bytes (``ensure_ascii`` writes each non-ASCII
character as 6 or 12 bytes), plus the keys and ids every StepDict has
(``MIN_STEP_WIRE_BYTES``); its weight in a chat context is its text's bytes exactly.
"""

from typing import Any

from django.db.models import F, Func, IntegerField, QuerySet, Subquery, Sum, Value, Window
from django.db.models.functions import Coalesce

# What a StepDict weighs on the wire besides its text, at the least (its keys, its two ids:
# 298 bytes for an empty one).
MIN_STEP_WIRE_BYTES = 250


class TextBytes(Func):
    """A text column's size: UTF-8 bytes on PostgreSQL (not decompressed), characters elsewhere."""

    function = "LENGTH"
    output_field = IntegerField()

    def __init__(self, column: str) -> None:
        super().__init__(F(column))

    def as_postgresql(self, compiler: Any, connection: Any, **extra_context: Any) -> Any:
        return Func.as_sql(self, compiler, connection, function="OCTET_LENGTH", **extra_context)


def cut_seq(steps: QuerySet[Any], *, max_bytes: int, per_step: int, limit: int | None = None) -> Subquery:
    """The seq of the newest of ``steps`` at which the running lower bound, newest first,
    passes ``max_bytes``; NULL when all of them fit (a subquery the database computes once).
    With ``limit`` the sum runs over the newest ``limit`` + 1 steps only, so a page of a long
    thread does not sum all of it."""
    if limit is not None:
        oldest_of_page = Subquery(steps.order_by("-seq").values("seq")[limit : limit + 1])
        steps = steps.filter(seq__gte=Coalesce(oldest_of_page, Value(0)))
    weight = TextBytes("input") + TextBytes("output") + Value(per_step)
    running = Window(Sum(weight), order_by=F("seq").desc())
    past = steps.order_by().annotate(running=running).filter(running__gt=max_bytes)
    return Subquery(past.order_by("-seq").values("seq")[:1])
