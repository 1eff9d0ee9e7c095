"""The phases of a chat run and the one table of legal moves between them.

    idle -> starting -> ready <-> streaming
              |           |          |
              v           v          v
             idle      stopping -> idle        (ready/streaming -> idle: the run ended)

Every phase change goes through ``transition``; an illegal move is a bug in the caller, so it
raises ``InvariantError`` instead of being tolerated.
"""

from enum import StrEnum


class Phase(StrEnum):
    IDLE = "idle"  # no run: the start state and where every run ends
    STARTING = "starting"  # the engine is being started; no run handle yet
    READY = "ready"  # a run is open and waiting for a turn
    STREAMING = "streaming"  # a turn is in flight
    STOPPING = "stopping"  # stop() closed the run; the close handler must not drain


LEGAL_MOVES: dict[Phase, frozenset[Phase]] = {
    Phase.IDLE: frozenset({Phase.STARTING}),
    Phase.STARTING: frozenset({Phase.READY, Phase.IDLE}),
    Phase.READY: frozenset({Phase.STREAMING, Phase.STOPPING, Phase.IDLE}),
    Phase.STREAMING: frozenset({Phase.READY, Phase.STOPPING, Phase.IDLE}),
    Phase.STOPPING: frozenset({Phase.IDLE}),
}


class InvariantError(RuntimeError):
    """An illegal phase move: the runtime's own state is wrong, not the user's input."""


def is_legal(current: Phase, target: Phase) -> bool:
    return target in LEGAL_MOVES[current]


def transition(current: Phase, target: Phase) -> Phase:
    """Return ``target`` if moving there from ``current`` is legal, else raise."""
    if not is_legal(current, target):
        raise InvariantError(f"illegal phase move {current} -> {target}")
    return target


def is_running(phase: Phase) -> bool:
    """A run is open (ready, streaming, or being stopped)."""
    return phase in (Phase.READY, Phase.STREAMING, Phase.STOPPING)


def is_busy(phase: Phase, *, was_busy: bool = False) -> bool:
    """A send now would collide with work in flight: starting, streaming, or stopping a busy run."""
    return phase in (Phase.STARTING, Phase.STREAMING) or (phase is Phase.STOPPING and was_busy)
