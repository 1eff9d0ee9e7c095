"""``GET /metrics``: this process's metrics (all processes' under multiprocess mode) in
Prometheus's text format, for a scraper that is allowed to read them.

What the metrics say (sockets, turns, failures) is for operators, not users: a request is
answered only with ``Authorization: Bearer <METRICS_TOKEN>`` (when a token is set) or from an
address in ``METRICS_ALLOWED_NETWORKS`` (loopback by default; the client's address is read
behind ``PROXY_COUNT`` proxies, so a request relayed by the site's own nginx counts as the
client's). Otherwise 401 when a token could have been sent, 403 when not; 404 with metrics
off. The body is built on a worker thread (``asyncio.to_thread``): under
multiprocess mode it reads every process's files.
"""

import asyncio
import hmac
import ipaddress
from functools import cache

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from chatproject.client_address import client_ip
from sessions_app import metrics_files


@cache
def _networks(spec: tuple[str, ...]) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    return tuple(ipaddress.ip_network(n, strict=False) for n in spec)


def _token_matches(request: HttpRequest) -> bool:
    token = str(settings.METRICS_TOKEN)
    header = request.META.get("HTTP_AUTHORIZATION", "")
    scheme, _, given = header.partition(" ")
    return bool(token) and scheme.lower() == "bearer" and hmac.compare_digest(given.strip(), token)


def _from_allowed_network(request: HttpRequest) -> bool:
    address = client_ip(request)
    if not address:
        return False
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in _networks(tuple(settings.METRICS_ALLOWED_NETWORKS)))


def _exposition() -> tuple[bytes, str]:
    from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest

    path = metrics_files.directory()
    if path is None:
        return generate_latest(REGISTRY), CONTENT_TYPE_LATEST
    from prometheus_client import multiprocess

    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=str(path))  # type: ignore[no-untyped-call]
    return generate_latest(registry), CONTENT_TYPE_LATEST


@never_cache
@require_safe
async def metrics(request: HttpRequest) -> HttpResponse:
    if not settings.METRICS_ENABLED:
        raise Http404
    if not (_token_matches(request) or _from_allowed_network(request)):
        if settings.METRICS_TOKEN:
            response = HttpResponse("a bearer token is needed\n", status=401, content_type="text/plain")
            response["WWW-Authenticate"] = 'Bearer realm="metrics"'
            return response
        return HttpResponse("not allowed from this address\n", status=403, content_type="text/plain")
    body, content_type = await asyncio.to_thread(_exposition)
    return HttpResponse(body, content_type=content_type)
