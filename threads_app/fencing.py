"""Fencing tokens: a write made under a claim lands only while that claim is still current.

Every claim a process holds (a thread's or a box's runtime, a session's turn) carries an
epoch, bumped by the conditional UPDATE that takes it. A process that was judged dead while
it still ran (a stall longer than its lease) comes back holding an old epoch. Its writes name
the claim they are made under (a ``Fence``): the condition "this row still has this owner
and this epoch" is folded into the write's own statement (a ``WHERE``, or the ``SELECT`` of
an ``INSERT ... SELECT``), so fencing costs no extra trip. The condition reads the claim's
row ``FOR SHARE``: a takeover committing at the same moment is waited for and then seen, so a
write either lands before the takeover (and the new owner reads it) or not at all. A statement
that locks the claim's own row ``FOR UPDATE`` (a step's append locks its thread) reads it
``FOR UPDATE`` in the condition too: a share lock taken first would be upgraded by the same
statement, and two writers upgrading one row deadlock.

A write that affects nothing because its fence no longer holds raises ``Fenced``; the caller
drops the work it lost, shows nothing of it, and leaves the claim to its new owner.
"""

import contextvars
import dataclasses
import functools
import threading
from typing import Any, TypeVar

from django.db import connection
from django.db.models import Model, QuerySet

M = TypeVar("M", bound=Model)


class Fenced(Exception):
    """The claim a write was made under was taken over: the write did nothing."""

    def __init__(self, fence: "Fence", what: str) -> None:
        super().__init__(f"{what} refused: {fence.describe()} is no longer current")
        self.fence = fence
        lost.add(fence)


@dataclasses.dataclass(frozen=True)
class Fence:
    """A claim as its holder knows it: which row (``model`` with primary key ``pk``), whose
    ``owner_field`` names ``owner`` and whose ``epoch_field`` is ``epoch`` (``None``: a claim
    whose owner never comes back to a holder that lost it, such as a send's ``holder``);
    ``also``: a second claim the same writes need (a hooks turn's user step: the turn's claim
    and the send's holder)."""

    model: type[Model]
    pk: Any
    owner_field: str
    epoch_field: str | None
    owner: str
    epoch: int | None
    also: "Fence | None" = None

    def with_also(self, other: "Fence | None") -> "Fence":
        return self if other is None else dataclasses.replace(self, also=other)

    def describe(self) -> str:
        here = (
            f"{self.model.__name__} {self.pk}'s {self.owner_field} claim ({self.owner}, epoch {self.epoch})"
        )
        return here if self.also is None else f"{here} with {self.also.describe()}"

    def sql(self, *, exclusive: bool = False) -> tuple[str, list[Any]]:
        """``EXISTS (...)``: the claim still holds, its row share-locked (PostgreSQL) until the
        write's transaction ends (``exclusive``: locked for update, for a statement that locks
        that row for update anyway); with its parameters."""
        pk = self.model._meta.pk  # noqa: SLF001 (Django's documented Model _meta API)
        assert pk is not None
        lock = _lock(connection.vendor, exclusive)
        condition = _condition(self.model, self.owner_field, self.epoch_field, lock)
        params = [pk.get_db_prep_value(self.pk, connection), self.owner]
        if self.epoch_field is not None:
            params.append(self.epoch)
        if self.also is not None:
            more, more_params = self.also.sql()
            return f"{condition} AND {more}", [*params, *more_params]
        return condition, params

    def holds(self) -> bool:
        """Whether the claim is still current (one read; for the rare re-check after a stall)."""
        held = {self.owner_field: self.owner}
        if self.epoch_field is not None:
            held[self.epoch_field] = self.epoch  # type: ignore[assignment]
        here = self.model._default_manager.filter(pk=self.pk, **held).exists()  # noqa: SLF001
        return here and (self.also is None or self.also.holds())

    def stamp(self) -> dict[str, Any]:
        """The step columns that record who wrote a step under which token."""
        return {"writer": self.owner, "writer_epoch": self.epoch}


class LostClaims:
    """The claims this process found taken over (bounded: the newest ``limit``), so that
    whatever still runs under one shows nothing more (``is_lost``)."""

    def __init__(self, limit: int = 4096) -> None:
        self._lock = threading.Lock()
        self._lost: dict[Fence, None] = {}
        self._limit = limit

    def add(self, fence: Fence) -> None:
        with self._lock:
            self._lost[fence] = None
            while len(self._lost) > self._limit:
                del self._lost[next(iter(self._lost))]

    def __contains__(self, fence: Fence) -> bool:
        with self._lock:
            return fence in self._lost

    def clear(self) -> None:
        with self._lock:
            self._lost.clear()


lost = LostClaims()


def is_lost(fence: Fence | None) -> bool:
    """Whether writes under ``fence`` were refused already (its work is another's now)."""
    return fence is not None and fence in lost


def _lock(vendor: str, exclusive: bool) -> str:
    if vendor != "postgresql":
        return ""
    return " FOR UPDATE" if exclusive else " FOR SHARE"


@functools.cache
def _condition(model: type[Model], owner_field: str, epoch_field: str | None, lock: str) -> str:
    meta = model._meta  # noqa: SLF001
    q = connection.ops.quote_name
    column = {f.name: str(f.column) for f in meta.concrete_fields}
    assert meta.pk is not None
    epoch = f" AND {q(column[epoch_field])} = %s" if epoch_field is not None else ""
    return (
        f"EXISTS (SELECT 1 FROM {q(meta.db_table)} WHERE {q(column[meta.pk.name])} = %s "
        f"AND {q(column[owner_field])} = %s{epoch}{lock})"
    )


# The claim the current task writes under, when its caller does not name one (a hook's turn
# sets it for the hook's code; ``sync_to_async`` carries it to the database thread).
current: contextvars.ContextVar[Fence | None] = contextvars.ContextVar("tether_fence", default=None)


def in_force(fence: Fence | None) -> Fence | None:
    """``fence``, or the current task's when none is named."""
    return fence if fence is not None else current.get()


def fenced(rows: QuerySet[M], fence: Fence | None) -> QuerySet[M]:
    """``rows`` narrowed to nothing unless ``fence`` still holds (an ORM write's condition).
    A write to rows of the claim's own model (an update, or a select for update, of the claim's
    row) locks the claim's row for update in the condition too."""
    if fence is None:
        return rows
    sql, params = fence.sql(exclusive=rows.model is fence.model)
    return rows.extra(where=[sql], params=params)
