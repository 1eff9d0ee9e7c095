"""What this process counts for Prometheus: every metric Tether exports, defined once.

The code where a thing happens (a socket connects, a turn ends, a webhook is delivered)
calls one of these; ``chatproject.metrics_endpoint`` serves them at ``/metrics``. With
``METRICS_ENABLED`` off each name is a no-op stand-in with the same methods, so a call costs
one attribute lookup. Under several processes prometheus-client's multiprocess mode (the
``PROMETHEUS_MULTIPROC_DIR`` environment variable) keeps each process's values in its own
files in that directory (``sessions_app.metrics_files`` cleans up after dead processes); a
gauge's ``multiprocess_mode`` says how processes add up: ``liveall`` keeps one series per live
process (its ``pid`` label), ``livesum`` adds the live ones.

A turn's latencies and database trips are measured by a ``TurnMeter``, started where the
send arrives (``lifecycle.client_message``) and carried by a context variable into the tasks
the turn runs in, so that nothing passes it along by hand.
"""

import time
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

# App kinds, the ``kind`` label of turn metrics: hooks-API apps and engine-runtime apps.
HOOKS = "hooks"
ENGINE = "engine"
# Input paths, the ``via`` label of budget refusals: socket events, HTTP (API) requests.
SOCKET = "socket"
HTTP = "http"
# The ``budget`` of a refusal the ASGI gate answers (a repeat of a request a budget refused
# a moment ago, ``chatproject.budget_gate``): it does not ask which budget again.
REPEAT = "repeat"

# Latency buckets, seconds: from a fast local ack to a slow engine's whole answer.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
TRIP_BUCKETS = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 24, 32, 64)
# Event counts of a session's replay window (EVENT_REPLAY_MAX_EVENTS is 1000 by default).
EVENT_BUCKETS = (0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)


class _Off:
    """A metric when metrics are off: takes every call, records nothing."""

    def labels(self, *_args: Any, **_kwargs: Any) -> "_Off":
        return self

    def inc(self, _amount: float = 1) -> None:
        pass

    def dec(self, _amount: float = 1) -> None:
        pass

    def set(self, _value: float) -> None:
        pass

    def observe(self, _value: float) -> None:
        pass


def _build() -> dict[str, Any]:
    if not settings.METRICS_ENABLED:
        off = _Off()
        return dict.fromkeys(_NAMES, off)
    from prometheus_client import Counter, Gauge, Histogram

    return {
        "sockets_connected": Gauge(
            "tether_sockets_connected", "Sockets connected to this process", multiprocess_mode="liveall"
        ),
        "sessions_live": Gauge(
            "tether_sessions_live",
            "Chat sessions live in this process (LiveSession)",
            multiprocess_mode="liveall",
        ),
        "turns_running": Gauge(
            "tether_turns_running", "Turns running now", ["kind"], multiprocess_mode="livesum"
        ),
        "turns_queued": Gauge(
            "tether_turns_queued",
            "Accepted sends waiting for their turn",
            ["kind"],
            multiprocess_mode="livesum",
        ),
        "turns": Counter("tether_turns", "Turns ended, by outcome", ["kind", "outcome"]),
        "sends_dropped": Counter("tether_sends_dropped", "Queued sends dropped by a stop", ["kind"]),
        "accept_to_ack": Histogram(
            "tether_accept_to_ack_seconds", "A send's arrival to its ack", ["kind"], buckets=LATENCY_BUCKETS
        ),
        "accept_to_first_token": Histogram(
            "tether_accept_to_first_token_seconds",
            "A send's arrival to the first output of its turn",
            ["kind"],
            buckets=LATENCY_BUCKETS,
        ),
        "accept_to_task_end": Histogram(
            "tether_accept_to_task_end_seconds",
            "A send's arrival to its turn's task_end",
            ["kind"],
            buckets=LATENCY_BUCKETS,
        ),
        "turn_database_trips": Histogram(
            "tether_turn_database_trips",
            "Database calls (trips to a database thread) from a send's arrival to its turn's end",
            ["kind"],
            buckets=TRIP_BUCKETS,
        ),
        "channel_layer_errors": Counter(
            "tether_channel_layer_errors", "Channel layer (Redis) operations that failed", ["operation"]
        ),
        "recovered": Counter("tether_recovered", "Work the recovery loop looked after", ["what"]),
        "stall_vouches": Counter(
            "tether_stall_vouches", "Leases renewed for stalled processes whose connections are open"
        ),
        "replays": Counter(
            "tether_replays",
            "Reconnects that asked for missed events, by whether the window covered them",
            ["recovered"],
        ),
        "event_log_window": Histogram(
            "tether_event_log_window_events",
            "Events a session's replay window held when a reconnect read it",
            buckets=EVENT_BUCKETS,
        ),
        "replayed_events": Histogram(
            "tether_replayed_events", "Events a reconnect was sent from the window", buckets=EVENT_BUCKETS
        ),
        "budget_refusals": Counter(
            "tether_budget_refusals", "Socket events and API requests refused by a budget", ["budget", "via"]
        ),
        "engine_runs": Gauge(
            "tether_engine_runs_open",
            "Engine runs (processes or connections) open",
            multiprocess_mode="livesum",
        ),
        "engine_idle_closes": Counter("tether_engine_idle_closes", "Engine runs closed for being idle"),
        "webhook_deliveries": Counter(
            "tether_webhook_attempts", "Webhook delivery attempts, by outcome", ["outcome"]
        ),
    }


_NAMES = (
    "sockets_connected",
    "sessions_live",
    "turns_running",
    "turns_queued",
    "turns",
    "sends_dropped",
    "accept_to_ack",
    "accept_to_first_token",
    "accept_to_task_end",
    "turn_database_trips",
    "channel_layer_errors",
    "recovered",
    "stall_vouches",
    "replays",
    "event_log_window",
    "replayed_events",
    "budget_refusals",
    "engine_runs",
    "engine_idle_closes",
    "webhook_deliveries",
)

_metrics = _build()
sockets_connected = _metrics["sockets_connected"]
sessions_live = _metrics["sessions_live"]
turns_running = _metrics["turns_running"]
turns_queued = _metrics["turns_queued"]
turns = _metrics["turns"]
sends_dropped = _metrics["sends_dropped"]
accept_to_ack = _metrics["accept_to_ack"]
accept_to_first_token = _metrics["accept_to_first_token"]
accept_to_task_end = _metrics["accept_to_task_end"]
turn_database_trips = _metrics["turn_database_trips"]
channel_layer_errors = _metrics["channel_layer_errors"]
recovered = _metrics["recovered"]
stall_vouches = _metrics["stall_vouches"]
replays = _metrics["replays"]
event_log_window = _metrics["event_log_window"]
replayed_events = _metrics["replayed_events"]
budget_refusals = _metrics["budget_refusals"]
engine_runs = _metrics["engine_runs"]
engine_idle_closes = _metrics["engine_idle_closes"]
webhook_deliveries = _metrics["webhook_deliveries"]


def count_http_budget_refusal(sender: object, budget: str, **_kwargs: object) -> None:
    """``threads_app.signals.budget_refused``: an API request a budget refused."""
    budget_refusals.labels(budget, HTTP).inc()


@dataclass
class TurnMeter:
    """One send's clock, from its arrival: the ack, the first output, the end of its turn,
    and the database trips on the way. ``accepted_wall`` (wall-clock seconds) travels with
    a send handed over to another process, whose own clock then measures from it."""

    kind: str
    started: float = field(default_factory=time.perf_counter)
    accepted_wall: float = field(default_factory=time.time)
    trips: int = 0
    first_output_seen: bool = False
    ended: bool = False

    def acked(self) -> None:
        accept_to_ack.labels(self.kind).observe(time.perf_counter() - self.started)

    def output(self) -> None:
        """The turn showed something of its answer (a token, a message); the first counts."""
        if not self.first_output_seen:
            self.first_output_seen = True
            accept_to_first_token.labels(self.kind).observe(time.perf_counter() - self.started)

    def end(self) -> None:
        """The turn's task_end (once)."""
        if not self.ended:
            self.ended = True
            accept_to_task_end.labels(self.kind).observe(time.perf_counter() - self.started)
            turn_database_trips.labels(self.kind).observe(self.trips)


current_meter: ContextVar[TurnMeter | None] = ContextVar("tether_turn_meter", default=None)


def count_database_trip() -> None:
    """A database call of the current context (``sessions_app.database``)."""
    meter = current_meter.get()
    if meter is not None:
        meter.trips += 1


@dataclass
class EngineTurnClock:
    """An engine turn's clock where it runs (maybe another process than the one that
    accepted its send): from the acceptance's wall-clock time, when the turn carries it
    (a recovered send does not). Counts the turn as running until ``end``."""

    accepted_wall: float | None
    first_output_seen: bool = False

    def __post_init__(self) -> None:
        turns_running.labels(ENGINE).inc()

    def output(self) -> None:
        if not self.first_output_seen:
            self.first_output_seen = True
            if self.accepted_wall is not None:
                accept_to_first_token.labels(ENGINE).observe(max(0.0, time.time() - self.accepted_wall))

    def end(self, outcome: str) -> None:
        turns_running.labels(ENGINE).dec()
        turns.labels(ENGINE, outcome).inc()
        if self.accepted_wall is not None:
            accept_to_task_end.labels(ENGINE).observe(max(0.0, time.time() - self.accepted_wall))
