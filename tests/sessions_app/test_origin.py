"""The socket handshake's Origin check (``sessions_app.origin``), in this process.

Each socket drives ``chatproject.asgi.application`` through ``InProcessSocket`` with a signed-in
user's session cookie and the ``Host`` a browser at ``http://127.0.0.1:8000`` sends: the pages
of issue 21 (another port or scheme of the same host) are refused at the handshake, the site's
own origin and ``CSRF_TRUSTED_ORIGINS`` (exact and ``*.`` forms) are accepted, and a client
with no Origin (an integration) goes on to the token check. ``tests/e2e/test_socket_origin_ui.py``
replays the attack in a real browser.
"""

import logging
from typing import Any

import pytest
from django.middleware.csrf import CsrfViewMiddleware
from django.test import override_settings

from sessions_app.origin import HandshakeRequest, is_trusted_origin
from tests.support.client import api_token, session_cookie
from tests.support.wire import SOCKET_PATH, InProcessSocket, in_process_socket

pytestmark = pytest.mark.django_db(transaction=True)

HOST = "127.0.0.1:8000"
OURS = f"http://{HOST}"
# What issue 21 found accepted with bob's cookie: pages of the same site, not of this origin.
SAME_SITE_ELSEWHERE = ["http://127.0.0.1:8998", "https://127.0.0.1", "http://localhost:1"]


@pytest.fixture
def app(settings, monkeypatch, tmp_path) -> None:
    """The lifecycle hooks app on the in-memory channel layer."""
    settings.CHAT_APP = "tests.apps.lifecycle_app"
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost", "chat.example.com"]
    settings.CSRF_TRUSTED_ORIGINS = []
    monkeypatch.setenv("HOOK_LOG", str(tmp_path / "hooks.jsonl"))
    # The first import of the ASGI app sets Django up, and its LOGGING replaces the root
    # logger's handlers: done here, caplog's handler (added for the test's call) stays.
    import chatproject.asgi  # noqa: F401


@pytest.fixture
async def cookie(app, make_user) -> str:
    return await session_cookie(make_user())


def browser(cookie: str | None, origin: str | None, host: str = HOST, **headers: str) -> InProcessSocket:
    """A handshake as a browser makes it: its cookie, the Host it asked and its page's Origin."""
    sent = {"host": host, **headers}
    if origin is not None:
        sent["origin"] = origin
    return InProcessSocket(cookie, headers=sent)


async def accepted(sock: InProcessSocket) -> bool:
    """Whether the handshake went through; an accepted socket connects as the cookie's user."""
    if not await sock.accept():
        return False
    try:
        await sock.handshake()
        await sock.connect_namespace()  # the session cookie signed it in
    finally:
        await sock.leave()
    return True


@pytest.mark.parametrize("origin", SAME_SITE_ELSEWHERE)
async def test_a_page_on_another_port_or_scheme_of_the_host_is_refused(cookie, origin, caplog):
    with caplog.at_level(logging.WARNING, logger="sessions_app.origin"):
        assert not await accepted(browser(cookie, origin))
    assert origin in caplog.text and OURS in caplog.text  # the log says what was expected


@pytest.mark.parametrize(
    "origin",
    ["null", "", "https://evil.example", f"{OURS}.evil.example", "http://127.0.0.1:80", "HTTP://x y"],
)
async def test_null_empty_and_foreign_origins_are_refused(cookie, origin):
    assert not await accepted(browser(cookie, origin))


async def test_the_sites_own_origin_is_accepted(cookie):
    assert await accepted(browser(cookie, OURS))
    assert await accepted(browser(cookie, "http://localhost:8000", host="localhost:8000"))
    # On port 80 neither the Host nor the Origin names the port.
    assert await accepted(browser(cookie, "http://127.0.0.1", host="127.0.0.1"))


async def test_a_host_outside_allowed_hosts_has_no_own_origin(cookie):
    """A page of a name that resolves here (DNS rebinding) speaks for itself, not for us."""
    assert not await accepted(browser(cookie, "http://rebound.example:8000", host="rebound.example:8000"))


async def test_behind_a_tls_proxy_the_origin_is_https_when_django_trusts_the_header(cookie, settings):
    forwarded = {"x-forwarded-proto": "https"}
    https = "https://chat.example.com"
    # Without SECURE_PROXY_SSL_HEADER the handshake is plain http, as Django sees the page.
    assert not await accepted(browser(cookie, https, host="chat.example.com", **forwarded))
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    assert await accepted(browser(cookie, https, host="chat.example.com", **forwarded))
    assert not await accepted(
        browser(cookie, "http://chat.example.com", host="chat.example.com", **forwarded)
    )


async def test_an_origin_in_csrf_trusted_origins_is_accepted(cookie, settings):
    settings.CSRF_TRUSTED_ORIGINS = ["https://chat.example.com"]
    assert await accepted(browser(cookie, "https://chat.example.com"))
    for near_miss in [
        "http://chat.example.com",
        "https://chat.example.com:8443",
        "https://a.chat.example.com",
    ]:
        assert not await accepted(browser(cookie, near_miss)), near_miss
    assert await accepted(browser(cookie, OURS))  # the site's own still is


async def test_a_wildcard_trusted_origin_covers_the_domain_and_its_subdomains(cookie, settings):
    settings.CSRF_TRUSTED_ORIGINS = ["https://*.example.com"]
    for origin in ["https://a.example.com", "https://a.b.example.com", "https://example.com"]:
        assert await accepted(browser(cookie, origin)), origin
    for origin in ["http://a.example.com", "https://a.example.com:8443", "https://evilexample.com"]:
        assert not await accepted(browser(cookie, origin)), origin


async def test_no_origin_is_no_browser_and_goes_on_to_the_token_check(app, make_user):
    token = await api_token(make_user())
    async with in_process_socket(None, headers={"authorization": f"Token {token}"}) as sock:
        await sock.connect_namespace()
    assert await accepted(browser(await session_cookie(make_user()), None))  # as before


# --- the same rule as Django's CSRF origin check --------------------------------------------

SCOPE: dict[str, Any] = {"type": "websocket", "path": SOCKET_PATH, "query_string": b"", "subprotocols": []}


def handshake(origin: str, host: str = HOST, **scope: Any) -> HandshakeRequest:
    headers = [(b"host", host.encode()), (b"origin", origin.encode()), (b"x-forwarded-proto", b"https")]
    return HandshakeRequest({**SCOPE, "headers": headers, **scope})


@pytest.mark.parametrize(
    ("origin", "host", "scope"),
    [
        (OURS, HOST, {}),
        ("https://127.0.0.1:8000", HOST, {}),
        ("https://127.0.0.1:8000", HOST, {"scheme": "wss"}),
        (OURS, HOST, {"scheme": "wss"}),
        ("http://127.0.0.1:8998", HOST, {}),
        ("https://chat.example.com", "chat.example.com", {}),
        ("https://a.example.com", HOST, {}),
        ("https://a.example.com:1", HOST, {}),
        ("https://trusted.example.org", HOST, {}),
        ("http://trusted.example.org", HOST, {}),
        ("null", HOST, {}),
        ("http://[::1", HOST, {}),
        ("http://evil.example", "evil.example", {}),
    ],
)
@pytest.mark.parametrize("proxy_header", [None, ("HTTP_X_FORWARDED_PROTO", "https")])
def test_the_rule_is_djangos_csrf_origin_rule(app, origin, host, scope, proxy_header):
    """Whatever Django's ``CsrfViewMiddleware`` would say of a form posted from ``origin`` to
    this Host, the socket says too (the same request, the same settings)."""
    with override_settings(
        SECURE_PROXY_SSL_HEADER=proxy_header,
        CSRF_TRUSTED_ORIGINS=["https://*.example.com", "https://trusted.example.org"],
    ):
        request = handshake(origin, host, **scope)
        # The test's oracle: Django's own check, private (no public API answers this).
        middleware = CsrfViewMiddleware(lambda r: None)  # type: ignore[arg-type]
        django_says = middleware._origin_verified(request)  # type: ignore[attr-defined]  # noqa: SLF001
        assert is_trusted_origin(origin, request) == django_says


def test_a_wss_scope_is_https():
    assert handshake(OURS, scheme="wss").is_secure()
    assert not handshake(OURS).is_secure()
    assert not handshake(OURS, scheme="ws").is_secure()
