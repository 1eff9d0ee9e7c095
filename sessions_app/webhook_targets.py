"""Where a webhook may be delivered: public addresses only, unless the operator allows more.

A box's owner chooses its ``webhook_url``, so without this check any user could make the
server POST to its own loopback services, the cloud metadata address (link-local) or the
private network behind it. A destination is refused when an address it resolves to is
loopback, private, link-local, multicast, unspecified, reserved or otherwise not globally
routable, and the check runs in the resolver aiohttp connects through: the addresses checked
are the addresses connected to, on every attempt (no DNS cache), so a name that re-resolves to
an internal address between two attempts (DNS rebinding) is refused too. IP literals never
reach a resolver and are checked before the request.

``WEBHOOK_ALLOWED_HOSTS`` lists exceptions: host names (compared with the URL's host) and
addresses or networks (``127.0.0.1``, ``10.0.0.0/8``, ``::1``), compared with the resolved
addresses.
"""

import ipaddress
import socket
from typing import Any

from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import ThreadedResolver
from django.conf import settings

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class ForbiddenDestination(Exception):
    """The webhook URL names a host the server may not deliver to."""


def _allowances() -> tuple[set[str], list[Network]]:
    names: set[str] = set()
    networks: list[Network] = []
    for entry in getattr(settings, "WEBHOOK_ALLOWED_HOSTS", None) or []:
        try:
            networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
        except ValueError:
            names.add(entry.strip().lower().rstrip("."))
    return names, networks


def is_public(address: Address) -> bool:
    """True for a globally routable unicast address (an IPv4-mapped IPv6 one is judged as IPv4)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_global and not (
        address.is_multicast
        or address.is_loopback
        or address.is_link_local
        or address.is_private
        or address.is_reserved
        or address.is_unspecified
    )


def host_allowed(host: str) -> bool:
    """Whether ``host`` (a URL's host) is allowed by name, whatever it resolves to."""
    names, _ = _allowances()
    return host.strip("[]").lower().rstrip(".") in names


def check_address(host: str, address: str) -> None:
    """Refuse ``address`` (resolved from ``host``) unless it is public or allowed."""
    try:
        parsed = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        raise ForbiddenDestination(f"{host} resolved to {address!r}, not an IP address") from None
    if is_public(parsed):
        return
    _, networks = _allowances()
    if any(parsed in network for network in networks):
        return
    raise ForbiddenDestination(
        f"{host} resolves to {parsed}, which is not a public address (see WEBHOOK_ALLOWED_HOSTS)"
    )


def check_literal(host: str) -> None:
    """Check a URL host that is an IP literal (aiohttp connects to those without resolving)."""
    if host_allowed(host):
        return
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return  # a name: the resolver checks what it resolves to
    check_address(host, host.strip("[]"))


class GuardedResolver(AbstractResolver):
    """aiohttp's threaded resolver, keeping only addresses a delivery may connect to."""

    def __init__(self) -> None:
        self._resolver = ThreadedResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        results = await self._resolver.resolve(host, port, family)
        if not host_allowed(host):
            for result in results:
                check_address(host, result["host"])
        return results

    async def close(self) -> None:
        await self._resolver.close()


def connector_options() -> dict[str, Any]:
    """``aiohttp.TCPConnector`` arguments for one delivery attempt: checked resolution, no DNS
    cache and no kept-alive connection, so every attempt resolves and is checked again."""
    return {"resolver": GuardedResolver(), "use_dns_cache": False, "force_close": True}
