"""Which spans a process keeps and where it sends them (``chatproject.tracing``; imported only
with tracing on, since it needs OpenTelemetry's SDK).

``OTEL_TRACES_SAMPLER`` / ``OTEL_TRACES_SAMPLER_ARG``: the standard's samplers, each composed
with ``NoStrayClientCalls``.

``OTEL_TRACES_EXPORTER``: ``otlp`` (the default: OTLP over HTTP, configured by the standard
``OTEL_EXPORTER_OTLP_*`` variables), ``console`` (stdout), ``file`` (one JSON object per span,
appended to ``OTEL_TRACES_FILE``: what a test of several processes reads back, or a log
shipper tails), ``none``.
"""

import json
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    ALWAYS_ON,
    DEFAULT_OFF,
    DEFAULT_ON,
    Decision,
    ParentBasedTraceIdRatio,
    Sampler,
    SamplingResult,
    TraceIdRatioBased,
)
from opentelemetry.trace import Link, SpanKind, get_current_span
from opentelemetry.trace.span import TraceState
from opentelemetry.util.types import Attributes

# The standard's samplers (``OTEL_TRACES_SAMPLER``, checked by the settings), built from the
# SDK's own classes; the ratio samplers take ``OTEL_TRACES_SAMPLER_ARG``, the others ignore it.
# Not the SDK's own reader of the two variables (``sampling._get_from_env_or_default``): it is
# private, and on a bad value it logs a warning and keeps every trace, where the settings refuse.
SAMPLERS: dict[str, Callable[[float], Sampler]] = {
    "always_on": lambda _ratio: ALWAYS_ON,
    "always_off": lambda _ratio: ALWAYS_OFF,
    "traceidratio": TraceIdRatioBased,
    "parentbased_always_on": lambda _ratio: DEFAULT_ON,
    "parentbased_always_off": lambda _ratio: DEFAULT_OFF,
    "parentbased_traceidratio": ParentBasedTraceIdRatio,
}


def configured_sampler() -> Sampler:
    """``TRACING_SAMPLER`` (with its ratio), with stray client calls dropped."""
    return NoStrayClientCalls(SAMPLERS[settings.TRACING_SAMPLER](settings.TRACING_SAMPLER_RATIO))


class NoStrayClientCalls(Sampler):
    """``sampler``, except that a database or Redis call with no parent (a heartbeat, a loop,
    the mailbox's reads) starts no trace: a trace is a request, a socket event or a turn.

    A span with a parent (a turn's, or one whose ``traceparent`` came from another process)
    is ``sampler``'s to decide: the parent-based ones follow the parent, so a turn forwarded
    through the mailbox is recorded whole or not at all; the ratio ones decide by the trace id,
    the same way in every process."""

    def __init__(self, sampler: Sampler) -> None:
        self._sampler = sampler

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: TraceState | None = None,
    ) -> SamplingResult:
        if kind is SpanKind.CLIENT and not get_current_span(parent_context).get_span_context().is_valid:
            return SamplingResult(Decision.DROP)
        return self._sampler.should_sample(
            parent_context, trace_id, name, kind, attributes, links, trace_state
        )

    def get_description(self) -> str:
        return f"NoStrayClientCalls{{{self._sampler.get_description()}}}"


class JsonLinesExporter(SpanExporter):
    """Each span as one JSON line appended to a file (several processes may share it: each
    line is one ``write`` of an append-mode file)."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        lines = "".join(json.dumps(span_record(span), separators=(",", ":")) + "\n" for span in spans)
        with self._lock, self._path.open("a", encoding="utf-8") as out:
            out.write(lines)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


def span_record(span: ReadableSpan) -> dict[str, Any]:
    """A span's ids (hex, as W3C writes them), name, kind, times and attributes."""
    context = span.get_span_context()
    assert context is not None
    return {
        "name": span.name,
        "kind": span.kind.name,
        "trace_id": f"{context.trace_id:032x}",
        "span_id": f"{context.span_id:016x}",
        "parent_id": f"{span.parent.span_id:016x}" if span.parent is not None else None,
        "start": span.start_time,
        "end": span.end_time,
        "attributes": dict(span.attributes or {}),
        "service": (span.resource.attributes or {}).get("service.name"),
        "pid": (span.resource.attributes or {}).get("process.pid"),
    }


def configured_exporter() -> SpanExporter | None:
    name = settings.TRACING_EXPORTER
    if name == "none":
        return None
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    if name == "file":
        if not settings.TRACING_FILE:
            raise ImproperlyConfigured("OTEL_TRACES_EXPORTER=file needs OTEL_TRACES_FILE")
        return JsonLinesExporter(Path(settings.TRACING_FILE))
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()
