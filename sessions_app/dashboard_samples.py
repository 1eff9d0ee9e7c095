"""This process's samples for the admin's dashboard: a bounded ring of per-minute samples,
published to the database for any process's dashboard to read.

The samples are read from the metrics this process already keeps (``sessions_app.metrics``,
through prometheus-client's public ``collect()``), so a turn pays nothing for them: once
every ``DASHBOARD_PUBLISH_EVERY`` seconds a thread of its own reads the counters, closes the
minute when one has passed (the counters' change over it, kept in a ring of
``RING_MINUTES``), and writes the live gauges, the ring and the minute so far onto this
process's ``ProcessSamples`` row. A table, not the multiprocess metric files: every
process reaches the database, wherever it runs, and the files exist only under
``PROMETHEUS_MULTIPROC_DIR``, one host's processes at a time.
"""

import logging
import threading
import time
from collections import deque
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connection
from django.utils import timezone

from sessions_app import metrics
from sessions_app.models import ProcessSamples

logger = logging.getLogger(__name__)

# An hour of minutes: what the dashboard's charts show.
RING_MINUTES = 60
# The upper bounds of the latency histograms' buckets, ``+Inf`` last (the samples' order).
BOUNDS: tuple[float, ...] = (*(float(b) for b in metrics.LATENCY_BUCKETS), float("inf"))
KINDS = (metrics.HOOKS, metrics.ENGINE)


def _samples(metric: Any) -> list[Any]:
    """The samples of one metric of this process (none when metrics are off)."""
    collect = getattr(metric, "collect", None)
    if collect is None:
        return []
    return [sample for family in collect() for sample in family.samples]


def _buckets(histogram: Any) -> list[float]:
    """A histogram's cumulative bucket counts, all kinds added, in ``BOUNDS`` order."""
    counts = [0.0] * len(BOUNDS)
    for sample in _samples(histogram):
        if sample.name.endswith("_bucket"):
            counts[BOUNDS.index(float(sample.labels["le"]))] += sample.value
    return counts


def read_counters() -> dict[str, Any]:
    """This process's counters now, cumulative: what a minute's sample is the change of."""
    turns = dict.fromkeys(KINDS, 0.0)
    errors = 0.0
    for sample in _samples(metrics.turns):
        if sample.name.endswith("_total"):
            turns[sample.labels["kind"]] = turns.get(sample.labels["kind"], 0.0) + sample.value
            if sample.labels["outcome"] == "error":
                errors += sample.value
    layer_errors = sum(s.value for s in _samples(metrics.channel_layer_errors) if s.name.endswith("_total"))
    return {
        "turns": turns,
        "errors": errors,
        "layer_errors": layer_errors,
        "first_token": _buckets(metrics.accept_to_first_token),
        "task_end": _buckets(metrics.accept_to_task_end),
    }


def read_gauges() -> dict[str, Any]:
    """This process's live gauges now."""

    def one(gauge: Any) -> float:
        return float(sum(s.value for s in _samples(gauge)))

    def by_kind(gauge: Any) -> dict[str, float]:
        values = dict.fromkeys(KINDS, 0.0)
        for sample in _samples(gauge):
            values[sample.labels["kind"]] = sample.value
        return values

    return {
        "sockets": one(metrics.sockets_connected),
        "sessions": one(metrics.sessions_live),
        "running": by_kind(metrics.turns_running),
        "queued": by_kind(metrics.turns_queued),
        "engine_runs": one(metrics.engine_runs),
    }


def _change(now: dict[str, Any], then: dict[str, Any]) -> dict[str, Any]:
    return {
        "turns": {kind: now["turns"].get(kind, 0.0) - then["turns"].get(kind, 0.0) for kind in now["turns"]},
        "errors": now["errors"] - then["errors"],
        "layer_errors": now["layer_errors"] - then["layer_errors"],
        "first_token": [a - b for a, b in zip(now["first_token"], then["first_token"], strict=True)],
        "task_end": [a - b for a, b in zip(now["task_end"], then["task_end"], strict=True)],
    }


class MinuteRing:
    """The last ``RING_MINUTES`` minutes of this process's counters, each the change over
    its minute. Lock-protected: the publisher writes it, a test or shell may read it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._minutes: deque[dict[str, Any]] = deque(maxlen=RING_MINUTES)
        self._minute: int | None = None  # the current minute's start, epoch seconds
        self._baseline: dict[str, Any] | None = None

    def sample(self, wall: float | None = None) -> list[dict[str, Any]]:
        """The closed minutes and the minute so far, oldest first, reading the counters now."""
        wall = time.time() if wall is None else wall
        minute = int(wall // 60) * 60
        counters = read_counters()
        with self._lock:
            if self._minute is None or self._baseline is None:
                self._minute, self._baseline = minute, counters
            elif minute != self._minute:
                self._minutes.append({"t": self._minute, **_change(counters, self._baseline)})
                self._minute, self._baseline = minute, counters
            return [*self._minutes, {"t": self._minute, **_change(counters, self._baseline)}]

    def clear(self) -> None:
        with self._lock:
            self._minutes.clear()
            self._minute, self._baseline = None, None


class SamplePublisher:
    """Writes this process's samples to its ``ProcessSamples`` row from a daemon thread
    (its own database connection), so the event loop never waits for it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.address = ""
        self.ring = MinuteRing()
        self._pruned_at = float("-inf")

    def start(self, address: str) -> None:
        """Start publishing for ``address`` (idempotent; nothing with metrics off)."""
        if not settings.METRICS_ENABLED or settings.DASHBOARD_PUBLISH_EVERY <= 0:
            return
        with self._lock:
            if self._thread is not None and self._thread.is_alive() and self.address == address:
                return
            self.address = address
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="tether-dashboard-samples", daemon=True)
            self._thread.start()

    def publish(self) -> None:
        """One write: the gauges, the ring and the minute so far; rows of processes gone for
        longer than the ring are deleted once a minute."""
        now = timezone.now()
        minutes = self.ring.sample()
        fields = {"updated_at": now, "current": read_gauges(), "minutes": minutes}
        if not ProcessSamples.objects.filter(address=self.address).update(**fields):
            ProcessSamples.objects.update_or_create(address=self.address, defaults=fields)
        if time.monotonic() - self._pruned_at >= 60:
            self._pruned_at = time.monotonic()
            ProcessSamples.objects.filter(updated_at__lt=now - timedelta(minutes=RING_MINUTES)).delete()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                close_old_connections()
                self.publish()
            except Exception:
                logger.exception("publishing the dashboard's samples failed")
                connection.close()
            self._stop.wait(settings.DASHBOARD_PUBLISH_EVERY)
        connection.close()

    def stop(self) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)
        self._thread = None
        self.ring.clear()

    def unregister(self) -> None:
        """A graceful shutdown: stop, and delete this process's row."""
        self.stop()
        if self.address:
            ProcessSamples.objects.filter(address=self.address).delete()


sample_publisher = SamplePublisher()
