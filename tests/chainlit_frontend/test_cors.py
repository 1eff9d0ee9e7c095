"""CORS on Chainlit's paths (``chainlit_frontend.cors``), through Tether's whole HTTP stack
(``chatproject.asgi.http_app``: the CORS layer, the budgets, the body limits, Django), in
process, and the socket's long-polling on a live server: a trusted other origin (``CSRF_TRUSTED_ORIGINS``, exact or
``https://*.`` subdomains) may read the answers and gets its preflights answered; any other
origin, ``null``, the site's own origin and every path outside the prefix get no CORS header,
and the app's own ``Access-Control-*`` headers are never sent twice."""

import asyncio
import json
from typing import Any

import aiohttp
import pytest
from django.conf import settings

from chatproject.asgi import http_app

pytestmark = pytest.mark.django_db(transaction=True)

HOST = "testserver"
TRUSTED = "http://app.localhost:5173"
PREFIX = settings.CHAINLIT_PATH_PREFIX


@pytest.fixture(autouse=True)
def trusted_origins(settings) -> None:
    settings.CSRF_TRUSTED_ORIGINS = [TRUSTED, "https://*.example.com"]


async def request(
    method: str, path: str, origin: str | None, headers: dict[str, str] | None = None, query: str = ""
) -> tuple[int, dict[str, list[str]], bytes]:
    """One request through ``http_app``: its status, its headers (lower-cased, every value)
    and its body."""
    listed = [(b"host", HOST.encode())]
    if origin is not None:
        listed.append((b"origin", origin.encode()))
    listed += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "headers": listed,
        "client": ("127.0.0.1", 50000),
        "server": (HOST, 80),
    }
    sent: list[dict[str, Any]] = []
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": b"", "more_body": False}
        # The client stays connected (Django listens for a disconnect while it answers).
        await asyncio.Event().wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await http_app(scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    found: dict[str, list[str]] = {}
    for key, value in start.get("headers", []):
        found.setdefault(bytes(key).decode().lower(), []).append(bytes(value).decode())
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], found, body


def cors_headers(headers: dict[str, list[str]]) -> dict[str, list[str]]:
    return {k: v for k, v in headers.items() if k.startswith("access-control-")}


async def test_a_trusted_origin_may_read_chainlits_api_with_credentials():
    status, headers, body = await request("GET", f"{PREFIX}/auth/config", TRUSTED)
    assert status == 200 and json.loads(body)["requireLogin"] is True, (status, body)
    assert cors_headers(headers) == {
        "access-control-allow-origin": [TRUSTED],
        "access-control-allow-credentials": ["true"],
    }, headers
    assert "Origin" in ", ".join(headers.get("vary", [])), headers


async def test_a_trusted_origins_preflight_is_answered_before_django():
    status, headers, body = await request(
        "OPTIONS",
        f"{PREFIX}/auth/jwt",
        TRUSTED,
        {
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization,content-type",
        },
    )
    assert (status, body) == (204, b""), (status, body)
    assert cors_headers(headers) == {
        "access-control-allow-origin": [TRUSTED],
        "access-control-allow-credentials": ["true"],
        "access-control-allow-methods": ["GET, POST, PUT, PATCH, DELETE, OPTIONS"],
        "access-control-allow-headers": ["authorization,content-type"],
        "access-control-max-age": ["600"],
    }, headers


async def test_a_subdomain_of_a_trusted_wildcard_is_trusted_on_its_scheme_only():
    _, https, _ = await request("GET", f"{PREFIX}/auth/config", "https://shop.example.com")
    assert https.get("access-control-allow-origin") == ["https://shop.example.com"], https
    _, http, _ = await request("GET", f"{PREFIX}/auth/config", "http://shop.example.com")
    assert cors_headers(http) == {}, http
    _, lookalike, _ = await request("GET", f"{PREFIX}/auth/config", "https://shop.example.com.evil.test")
    assert cors_headers(lookalike) == {}, lookalike


@pytest.mark.parametrize(
    "origin",
    ["http://evil.test", "http://app.localhost:5174", "https://app.localhost:5173", "null", f"http://{HOST}"],
)
async def test_other_origins_null_and_the_sites_own_get_no_cors_header(origin):
    """Another port or scheme is another origin; the site's own needs no header."""
    _, headers, _ = await request("GET", f"{PREFIX}/auth/config", origin)
    assert cors_headers(headers) == {}, (origin, headers)
    status, preflight, _ = await request(
        "OPTIONS", f"{PREFIX}/auth/jwt", origin, {"Access-Control-Request-Method": "POST"}
    )
    assert cors_headers(preflight) == {} and status != 204, (origin, status, preflight)


async def test_an_untrusted_origins_sign_in_is_refused_by_its_origin():
    """No CORS header, and the unsafe request itself is refused (the Origin check)."""
    status, headers, _ = await request(
        "POST", f"{PREFIX}/auth/jwt", "http://evil.test", {"Authorization": "Bearer whatever"}
    )
    assert status == 403 and cors_headers(headers) == {}, (status, headers)


@pytest.mark.parametrize("path", ["/api/threads/", "/healthz", "/accounts/login/", PREFIX])
async def test_paths_outside_the_prefix_get_no_cors_header(path):
    """Only Chainlit's paths answer other origins (the prefix itself, without its slash, is
    not under it); Tether's own API stays same-origin."""
    _, headers, _ = await request("GET", path, TRUSTED)
    assert cors_headers(headers) == {}, (path, headers)
    _, preflight, _ = await request("OPTIONS", path, TRUSTED, {"Access-Control-Request-Method": "POST"})
    assert cors_headers(preflight) == {}, (path, preflight)


@pytest.fixture(scope="module")
def trusting_server(server_factory):
    """A live server (daphne) trusting ``TRUSTED``: the socket's long-polling opens a session
    that lives on in its process."""
    return server_factory.start(CSRF_TRUSTED_ORIGINS=TRUSTED)


async def test_the_sockets_long_polling_under_the_prefix_answers_a_trusted_origin(trusting_server):
    """The copilot's socket starts with long-polling, an XHR with credentials across origins."""
    query = "?EIO=4&transport=polling"
    async with aiohttp.ClientSession() as http:
        for origin, path, status, allowed in [
            (TRUSTED, f"{PREFIX}/ws/socket.io/", 200, [TRUSTED]),
            # Another origin: no header, and the handshake itself is refused by its Origin.
            ("http://evil.test", f"{PREFIX}/ws/socket.io/", 403, None),
            (TRUSTED, "/ws/socket.io/", 200, None),  # Tether's own socket path is not Chainlit's
        ]:
            async with http.get(trusting_server.url + path + query, headers={"Origin": origin}) as response:
                body = await response.read()
                opened = body.startswith(b"0{")
                assert (response.status, opened) == (status, status == 200), (
                    path,
                    response.status,
                    body[:200],
                )
                got = response.headers.getall("Access-Control-Allow-Origin", None)
                assert got == allowed, (origin, path, dict(response.headers))
                if allowed:
                    assert response.headers.get("Access-Control-Allow-Credentials") == "true"


async def test_a_plain_options_request_is_not_a_preflight():
    """OPTIONS without Access-Control-Request-Method goes to the app, with the CORS headers."""
    status, headers, _ = await request("OPTIONS", f"{PREFIX}/auth/config", TRUSTED)
    assert status != 204, status
    assert headers.get("access-control-allow-origin") == [TRUSTED], headers
    assert "access-control-allow-methods" not in headers, headers
