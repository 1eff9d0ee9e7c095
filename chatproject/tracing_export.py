"""Which spans a process keeps and where it sends them (``chatproject.tracing``; imported only
with tracing on, since it needs OpenTelemetry's SDK).

``OTEL_TRACES_EXPORTER``: ``otlp`` (the default: OTLP over HTTP, configured by the standard
``OTEL_EXPORTER_OTLP_*`` variables), ``console`` (stdout), ``file`` (one JSON object per span,
appended to ``OTEL_TRACES_FILE``: what a test of several processes reads back, or a log
shipper tails), ``none``.
"""

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from opentelemetry.trace import Link, SpanKind
from opentelemetry.trace.span import TraceState
from opentelemetry.util.types import Attributes


class NoStrayClientCalls(Sampler):
    """The root sampler: a database or Redis call with no parent (a heartbeat, a loop, the
    mailbox's reads) starts no trace; any other root (a request, a socket event) does."""

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
        if kind is SpanKind.CLIENT:
            return SamplingResult(Decision.DROP)
        return SamplingResult(Decision.RECORD_AND_SAMPLE, attributes)

    def get_description(self) -> str:
        return "NoStrayClientCalls"


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
