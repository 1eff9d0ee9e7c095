"""The address a request came from, as the login lockout (django-axes) keys on it.

Behind reverse proxies the connection comes from the nearest proxy, and each proxy appends
the address it saw to ``X-Forwarded-For``. With ``PROXY_COUNT`` proxies in front, the client
is that many entries from the right; entries further left were written by the client and
prove nothing. django-axes reads the header only through django-ipware, which Tether does not
install: without this, every client behind a proxy looked like the proxy, and five wrong
passwords from anyone locked a username out for everybody.
"""

import ipaddress

from django.conf import settings
from django.http import HttpRequest


def client_ip(request: HttpRequest) -> str | None:
    """The client's address: from ``X-Forwarded-For`` behind ``PROXY_COUNT`` proxies, else
    the connection's own (also when the header has fewer entries than there are proxies, or
    the entry is not an address: such a request did not come through them)."""
    remote = request.META.get("REMOTE_ADDR")
    count = int(settings.PROXY_COUNT)
    if count <= 0:
        return remote
    forwarded = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")]
    forwarded = [part for part in forwarded if part]
    if len(forwarded) < count:
        return remote
    candidate = forwarded[-count]
    try:
        return str(ipaddress.ip_address(candidate))
    except ValueError:
        return remote
