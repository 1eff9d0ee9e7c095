"""A ChatSession's queue of turns waiting behind the one in flight, counted on the
``tether_turns_queued{kind="engine"}`` gauge as it changes.

The queue is a list the session appends to, inserts at the front of and clears (when it
merges the waiting turns into the next one, or drops them on a stop or a takeover); those
three are the changes it makes (``pop`` and ``remove`` count too), so the gauge moves with them. A turn that never
waits never touches the queue, and pays nothing.
"""

from typing import SupportsIndex

from sessions_app import metrics
from sessions_app.runtime.engines.base import UserTurn


class QueuedTurns(list[UserTurn]):
    """The turns waiting in one ChatSession, oldest first."""

    def append(self, turn: UserTurn) -> None:
        super().append(turn)
        metrics.turns_queued.labels(metrics.ENGINE).inc()

    def insert(self, index: SupportsIndex, turn: UserTurn) -> None:
        super().insert(index, turn)
        metrics.turns_queued.labels(metrics.ENGINE).inc()

    def clear(self) -> None:
        if self:
            metrics.turns_queued.labels(metrics.ENGINE).dec(len(self))
            super().clear()

    def pop(self, index: SupportsIndex = -1) -> UserTurn:
        turn = super().pop(index)
        metrics.turns_queued.labels(metrics.ENGINE).dec()
        return turn

    def remove(self, turn: UserTurn) -> None:
        super().remove(turn)
        metrics.turns_queued.labels(metrics.ENGINE).dec()
