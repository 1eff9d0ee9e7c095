"""The admin's live dashboard (``/admin/tether/dashboard/``, staff only): the processes and
their liveness, sockets, sessions and turns per process, an hour of turns, errors and
latencies per minute, and the sends that failed lately, with links to their admin pages.

The page is a template whose script (``tether/admin/dashboard.js``, charts by the vendored
uPlot) fetches :func:`data` every few seconds. The figures are what each process published
(``sessions_app.dashboard_samples``): the minutes of all processes are added up, and the
latency quantiles are read from the added histogram buckets, as Prometheus's
``histogram_quantile`` does, never averaged across processes.
"""

import time
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.admin import site
from django.http import HttpRequest, JsonResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.text import Truncator
from django.utils.translation import gettext as _

from sessions_app.dashboard_samples import BOUNDS, KINDS, RING_MINUTES
from sessions_app.models import ProcessSamples, ServerProcess
from sessions_app.processes import dead_cutoff
from threads_app.selectors import recent_failed_sends

# How many failed sends the page lists, and how often it asks for new figures (ms).
FAILURES_SHOWN = 20
REFRESH_MS = 3000


def quantile(q: float, cumulative: list[float]) -> float | None:
    """The ``q`` quantile of a histogram's cumulative bucket counts (``BOUNDS`` order),
    interpolated within its bucket; None when it counted nothing."""
    total = cumulative[-1] if cumulative else 0
    if total <= 0:
        return None
    rank = q * total
    for index, count in enumerate(cumulative):
        if count >= rank:
            lower = BOUNDS[index - 1] if index else 0.0
            upper = BOUNDS[index]
            if upper == float("inf"):
                return lower
            below = cumulative[index - 1] if index else 0.0
            within = count - below
            return lower + (upper - lower) * ((rank - below) / within if within else 1.0)
    return None


def _series(rows: list[ProcessSamples], now: float) -> dict[str, list[Any]]:
    """The last hour, minute by minute, every process's samples added up."""
    last = int(now // 60) * 60
    starts = [last - 60 * back for back in range(RING_MINUTES - 1, -1, -1)]
    slot = {t: i for i, t in enumerate(starts)}
    width = len(BOUNDS)
    turns = {kind: [0.0] * len(starts) for kind in KINDS}
    errors = [0.0] * len(starts)
    first_token = [[0.0] * width for _ in starts]
    task_end = [[0.0] * width for _ in starts]
    for row in rows:
        for minute in row.minutes if isinstance(row.minutes, list) else []:
            i = slot.get(minute.get("t"))
            if i is None:
                continue
            for kind in KINDS:
                turns[kind][i] += minute.get("turns", {}).get(kind, 0)
            errors[i] += minute.get("errors", 0) + minute.get("layer_errors", 0)
            for into, key in ((first_token, "first_token"), (task_end, "task_end")):
                for b, count in enumerate(minute.get(key, [])[:width]):
                    into[i][b] += count
    return {
        "t": starts,
        **{f"turns_{kind}": turns[kind] for kind in KINDS},
        "errors": errors,
        "first_token_p95": [quantile(0.95, buckets) for buckets in first_token],
        "task_end_p50": [quantile(0.5, buckets) for buckets in task_end],
        "task_end_p95": [quantile(0.95, buckets) for buckets in task_end],
    }


def _processes(rows: dict[str, ProcessSamples]) -> list[dict[str, Any]]:
    now = timezone.now()
    cutoff = dead_cutoff()
    listed = []
    for process in ServerProcess.objects.order_by("started_at"):
        samples = rows.get(process.address)
        current = samples.current if samples is not None and isinstance(samples.current, dict) else {}
        beat = process.beat_at or process.heartbeat_at
        listed.append(
            {
                "address": process.address,
                "name": str(process),
                "app": process.app,
                "alive": process.heartbeat_at >= cutoff,
                "draining": process.draining,
                "heartbeat_at": process.heartbeat_at.isoformat(),
                "beat_age": round((now - beat).total_seconds(), 1),
                "sockets": current.get("sockets", 0),
                "sessions": current.get("sessions", 0),
                "running": current.get("running", {}),
                "queued": current.get("queued", {}),
                "engine_runs": current.get("engine_runs", 0),
                "samples_age": (
                    round((now - samples.updated_at).total_seconds(), 1) if samples is not None else None
                ),
            }
        )
    return listed


def _failures(since_minutes: int) -> list[dict[str, Any]]:
    since = timezone.now() - timedelta(minutes=since_minutes)
    return [
        {
            "send": str(send.pk),
            "thread": str(send.thread_id),
            "text": Truncator(send.text).chars(80),
            "state": send.state,
            "outcome": send.outcome,
            "failure": send.failure,
            "source": send.source,
            "accepted_at": send.accepted_at.isoformat(),
            "send_url": reverse("admin:threads_app_acceptedmessage_change", args=[send.pk]),
            "thread_url": reverse("admin:threads_app_thread_change", args=[send.thread_id]),
        }
        for send in recent_failed_sends(since, FAILURES_SHOWN)
    ]


def snapshot() -> dict[str, Any]:
    """What the dashboard shows now, as JSON-ready data."""
    since = timezone.now() - timedelta(minutes=RING_MINUTES)
    rows = {row.address: row for row in ProcessSamples.objects.filter(updated_at__gte=since)}
    processes = _processes(rows)
    live = [p for p in processes if p["alive"]]

    def total(key: str) -> float:
        return float(sum(p[key] for p in live))

    def by_kind(key: str) -> dict[str, float]:
        return {kind: sum(p[key].get(kind, 0) for p in live) for kind in KINDS}

    return {
        "metrics_enabled": settings.METRICS_ENABLED,
        "processes": processes,
        "totals": {
            "processes": len(live),
            "sockets": total("sockets"),
            "sessions": total("sessions"),
            "running": by_kind("running"),
            "queued": by_kind("queued"),
        },
        "series": _series(list(rows.values()), time.time()),
        "failures": _failures(RING_MINUTES),
    }


def page(request: HttpRequest) -> TemplateResponse:
    context = {
        **site.each_context(request),
        "title": _("Live dashboard"),
        "data_url": reverse("admin-dashboard-data"),
        "refresh_ms": REFRESH_MS,
        "metrics_enabled": settings.METRICS_ENABLED,
    }
    return TemplateResponse(request, "admin/tether/dashboard.html", context)


def data(request: HttpRequest) -> JsonResponse:
    return JsonResponse(snapshot())


# Staff only, as every admin page: ``admin_view`` sends others to the admin's login (302).
dashboard_page = site.admin_view(page)
dashboard_data = site.admin_view(data)
