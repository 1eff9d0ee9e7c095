"""Traces (OpenTelemetry), off unless ``OTEL_ENABLED``: one trace per turn, across processes.

``start`` (called by ``chatproject.asgi`` before Django loads its middleware) installs the SDK
and the official Django, psycopg and Redis instrumentations; the rest of Tether opens its own
spans through the functions below: the socket event that accepted a send (or an integration's
request, Django's own span), the mailbox request that carried it to the thread's owner (its W3C
``traceparent`` rides in the request), the turn and its reply, and the webhook attempts of an
integration turn's response, children of that turn (its ``traceparent`` rides in each
attempt's stored task, retries' too). With tracing off, ``start`` imports nothing of
OpenTelemetry and every function here returns at its first line (``None``, or one shared
do-nothing context manager): a turn runs no OpenTelemetry code
(``tests/chatproject/test_tracing.py`` pins that).

Roots: a span with no parent is kept when the sampler (``OTEL_TRACES_SAMPLER``, the standard's
names; every trace by default) says so, unless it is a client call (a database or Redis call
that belongs to no traced work: heartbeats, the mailbox's reads, the loops), so a trace is
either a request, a socket event or a turn (one a recovery runs), or the webhook attempts
of a response no turn made (a recovery's closing of a cut turn), never a stray query every
second; a mailbox
request or bus event sent from untraced work opens no span where it is served (``continued``)
for the same reason. A span with a parent follows the parent's decision (the parent-based
samplers), also when the parent is in another process: a forwarded turn is recorded whole or
not at all (``tests/e2e/test_tracing_cluster.py``).

Exporters (``OTEL_TRACES_EXPORTER``): ``otlp`` (OTLP over HTTP, configured by the standard
``OTEL_EXPORTER_OTLP_*`` variables), ``console``, ``file`` (JSON lines appended to
``OTEL_TRACES_FILE``: ``chatproject.tracing_export``) or ``none``.
"""

import contextlib
import contextvars
import os
from collections.abc import Coroutine, Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, TypeVar

from django.conf import settings

from threads_app import prepared

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Span, Tracer

T = TypeVar("T")
C = TypeVar("C", bound=type)

OFF: AbstractContextManager[None] = contextlib.nullcontext()
"""The do-nothing context manager every function here returns with tracing off."""


class _Tracing:
    """This process's tracer and provider once ``start`` ran with tracing on (``None``
    otherwise): one owner, emptied by ``stop`` (tests)."""

    def __init__(self) -> None:
        self.tracer: Tracer | None = None
        self.provider: TracerProvider | None = None


_state = _Tracing()


def enabled() -> bool:
    return _state.tracer is not None


def start(exporter: "SpanExporter | None" = None, *, batch: bool = True) -> None:
    """Install the SDK and the instrumentations once, when ``TRACING_ENABLED``. ``exporter``
    replaces the configured one (tests pass an in-memory exporter, ``batch=False``)."""
    if _state.tracer is not None or not settings.TRACING_ENABLED:
        return
    from opentelemetry import trace
    from opentelemetry.instrumentation.django import DjangoInstrumentor
    from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor
    from opentelemetry.instrumentation.redis import RedisInstrumentor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    from chatproject.tracing_export import configured_exporter, configured_sampler

    provider = TracerProvider(
        sampler=configured_sampler(),
        # The pid tells a cluster's processes apart (ServerProcess.pid names them too).
        resource=Resource.create({"service.name": settings.TRACING_SERVICE_NAME, "process.pid": os.getpid()}),
    )
    exporter = exporter if exporter is not None else configured_exporter()
    if exporter is not None:
        provider.add_span_processor(BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter))
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        trace.set_tracer_provider(provider)  # once per process; tests' restarts keep their own
    DjangoInstrumentor().instrument(tracer_provider=provider)
    PsycopgInstrumentor().instrument(tracer_provider=provider)
    RedisInstrumentor().instrument(tracer_provider=provider)
    _state.provider, _state.tracer = provider, provider.get_tracer("tether")
    prepared.make_cursors_of(cursor_class)


def stop() -> None:
    """Flush and remove the instrumentations (tests; a process exits without it)."""
    if _state.provider is None:
        return
    from opentelemetry.instrumentation.django import DjangoInstrumentor
    from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor
    from opentelemetry.instrumentation.redis import RedisInstrumentor

    prepared.make_cursors_of(None)
    DjangoInstrumentor().uninstrument()
    PsycopgInstrumentor().uninstrument()
    RedisInstrumentor().uninstrument()
    _state.provider.shutdown()
    _state.provider, _state.tracer = None, None


def cursor_class(base: C) -> C:
    """``base``, a psycopg cursor class Tether makes cursors of itself (``threads_app.prepared``:
    not through the connection's cursor factory, which the psycopg instrumentation traces),
    traced the same way."""
    # The instrumentation's own factory of traced cursor classes (what it installs on every
    # connection it opens), on the class given: a name of its module, pinned with it.
    from opentelemetry.instrumentation.psycopg import _new_cursor_factory

    traced: C = _new_cursor_factory(base_factory=base, tracer_provider=_state.provider)
    return traced


def span(
    name: str, attributes: Mapping[str, Any] | None = None, *, kind: str = "internal"
) -> AbstractContextManager[Any]:
    """A span of the current context for the ``with`` block (a do-nothing one when off)."""
    tracer = _state.tracer
    if tracer is None:
        return OFF
    return tracer.start_as_current_span(name, attributes=attributes, kind=_kind(kind))


def part(name: str, attributes: Mapping[str, Any] | None = None) -> AbstractContextManager[Any]:
    """``span``, in a trace only: a span of work that is part of something else (a turn's
    reply) and starts no trace of its own when it runs outside one (a reply an action's
    callback shows, where no send started a turn)."""
    tracer = _state.tracer
    if tracer is None:
        return OFF
    from opentelemetry.trace import get_current_span

    if not get_current_span().get_span_context().is_valid:
        return OFF
    return tracer.start_as_current_span(name, attributes=attributes)


def carrier() -> dict[str, str] | None:
    """The current span's context as W3C headers, to carry to another task or process."""
    if _state.tracer is None:
        return None
    from opentelemetry.propagate import inject

    headers: dict[str, str] = {}
    inject(headers)
    return headers or None


def carrier_of(span_: "Span | None") -> dict[str, str] | None:
    """``span_``'s context as W3C headers, whether or not it is current (a turn's, for the
    webhook attempts of its response); None when off."""
    if span_ is None:
        return None
    from opentelemetry.propagate import inject
    from opentelemetry.trace import set_span_in_context

    headers: dict[str, str] = {}
    inject(headers, context=set_span_in_context(span_))
    return headers or None


def inject(message: dict[str, Any]) -> dict[str, Any]:
    """``message`` with the current trace context (``traceparent``) when tracing is on."""
    if _state.tracer is None:
        return message
    headers = carrier()
    return {**message, **headers} if headers else message


def received(
    message: Mapping[str, Any],
    name: str,
    attributes: Mapping[str, Any] | None = None,
    *,
    kind: str = "server",
) -> AbstractContextManager[Any]:
    """A server span (``consumer`` for a queued task) for a message from another process or
    an earlier time, child of the span that sent it (``inject``'s ``traceparent``, or a
    ``carrier``); do-nothing when off."""
    tracer = _state.tracer
    if tracer is None:
        return OFF
    return tracer.start_as_current_span(
        name, context=_extract(message), attributes=attributes, kind=_kind(kind)
    )


def continued(
    message: Mapping[str, Any], name: str, attributes: Mapping[str, Any] | None = None
) -> AbstractContextManager[Any]:
    """``received``'s server span when ``message`` carries a trace (its ``traceparent``),
    else nothing: a mailbox request or bus event sent from untraced work (a reconnect's
    ``runtime.watch``, a loop's request) starts no trace in the process that serves it. What
    that work starts there (a turn) is a root of its own, as it would be in the sender."""
    if _state.tracer is None or "traceparent" not in message:
        return OFF
    return received(message, name, attributes)


def fresh_context() -> contextvars.Context:
    """An empty context for work that must not inherit its caller's (``run_on_server_loop``),
    holding the caller's current span when traces are on: what it runs stays in the trace."""
    context = contextvars.Context()
    if _state.tracer is None:
        return context
    from opentelemetry.context import attach
    from opentelemetry.trace import get_current_span, set_span_in_context

    context.run(attach, set_span_in_context(get_current_span()))
    return context


def begin(
    name: str, parent: Mapping[str, str] | None, attributes: Mapping[str, Any] | None = None
) -> "Span | None":
    """A span that outlives the block that starts it (a turn: begun in one callback, ended in
    another), child of ``parent`` (a ``carrier``); None when off. End it with ``end``."""
    tracer = _state.tracer
    if tracer is None:
        return None
    return tracer.start_span(name, context=_extract(parent) if parent else None, attributes=attributes)


def note_outcome(outcome: str) -> None:
    """Record ``outcome`` on the current span (a hooks-API turn's, as it ends)."""
    if _state.tracer is None:
        return
    from opentelemetry.trace import get_current_span

    get_current_span().set_attribute("tether.outcome", outcome)


def end(span_: "Span | None", outcome: str | None = None) -> None:
    if span_ is None:
        return
    if outcome is not None:
        span_.set_attribute("tether.outcome", outcome)
    span_.end()


def active(span_: "Span | None") -> AbstractContextManager[Any]:
    """Make ``span_`` current for the block (work done for a turn from another task)."""
    if span_ is None:
        return OFF
    from opentelemetry.trace import use_span

    return use_span(span_, end_on_exit=False)


def traced(name: str, attributes: Mapping[str, Any], coro: Coroutine[Any, Any, T]) -> Coroutine[Any, Any, T]:
    """``coro`` run inside a span of that name (``coro`` itself when off)."""
    if _state.tracer is None:
        return coro
    return _traced(name, attributes, coro)


async def _traced(name: str, attributes: Mapping[str, Any], coro: Coroutine[Any, Any, T]) -> T:
    with span(name, attributes):
        return await coro


def _extract(headers: Mapping[str, Any]) -> Any:
    """The context ``headers`` carry (a ``carrier``, or a message with its keys): the W3C
    propagator reads ``traceparent`` and ``tracestate`` and ignores the other keys."""
    from opentelemetry.propagate import extract

    return extract(headers)


def _kind(name: str) -> Any:
    from opentelemetry.trace import SpanKind

    kinds = {
        "internal": SpanKind.INTERNAL,
        "server": SpanKind.SERVER,
        "client": SpanKind.CLIENT,
        "consumer": SpanKind.CONSUMER,
    }
    return kinds[name]
