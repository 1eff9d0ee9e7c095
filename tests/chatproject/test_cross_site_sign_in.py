"""The cross-site sign-in (``SESSION_COOKIE_SAMESITE=None``): a login answers with a
``SameSite=None; Secure`` session cookie, a setting without ``Secure`` stops the start, and the
Origin checks still decide which pages may use the cookie (the socket, its long-polling and
the CORS answers refuse another site that is not trusted, and a page on another port)."""

import os
import subprocess
import sys
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from chatproject import cookie_policy, secret_key

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]
P = settings.CHAINLIT_PATH_PREFIX
SHOP = "https://shop.example.net"  # the copilot's host page: another site, trusted
EVIL = "https://evil.example"  # another site, not trusted


def manage_check(**env: str) -> subprocess.CompletedProcess[str]:
    """``manage.py check`` in a fresh process, so settings.py reads ``env``."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SESSION_COOKIE_", "DJANGO_ENV"))}
    return subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env={**base, "SECRET_KEY": secret_key.generate(), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_samesite_none_without_secure_is_refused_and_other_values_are_read():
    with pytest.raises(ImproperlyConfigured, match="needs a Secure session cookie"):
        cookie_policy.session_cookie_samesite("None", secure=False)
    with pytest.raises(ImproperlyConfigured, match="expected Lax, Strict or None"):
        cookie_policy.session_cookie_samesite("none-please", secure=True)
    assert cookie_policy.session_cookie_samesite("none", secure=True) == "None"
    assert cookie_policy.session_cookie_samesite(" strict ", secure=False) == "Strict"
    assert cookie_policy.session_cookie_samesite(None, secure=False) == "Lax"
    assert cookie_policy.session_cookie_samesite("", secure=True) == "Lax"


def test_the_server_refuses_to_start_with_samesite_none_and_no_secure_cookie():
    refused = manage_check(SESSION_COOKIE_SAMESITE="None")
    assert refused.returncode != 0, refused.stdout + refused.stderr
    assert "ImproperlyConfigured" in refused.stderr and "needs a Secure session cookie" in refused.stderr
    assert manage_check(SESSION_COOKIE_SAMESITE="None", SESSION_COOKIE_SECURE="1").returncode == 0
    # The production profile's cookie is always Secure, so None alone is enough there.
    production = manage_check(SESSION_COOKIE_SAMESITE="None", DJANGO_ENV="production")
    assert production.returncode == 0, production.stderr


def set_cookies(response: aiohttp.ClientResponse) -> dict[str, Any]:
    """The response's ``Set-Cookie`` headers by cookie name, each with its attributes."""
    cookies: dict[str, Any] = {}
    for header in response.headers.getall("Set-Cookie", []):
        parsed: SimpleCookie = SimpleCookie()
        parsed.load(header)
        cookies.update({name: (morsel, header) for name, morsel in parsed.items()})
    return cookies


async def sign_in(server: Any, user: Any, origin: str) -> tuple[int, dict[str, Any]]:
    form = {"username": user.username, "password": user.raw_password}
    url = f"{server.url}{P}/login"
    async with (
        aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar()) as http,
        http.post(url, data=form, headers={"Origin": origin}) as response,
    ):
        return response.status, set_cookies(response)


@pytest.fixture(scope="module")
def cross_site_server(server_factory):
    return server_factory.start(
        SESSION_COOKIE_SAMESITE="None", SESSION_COOKIE_SECURE="1", CSRF_TRUSTED_ORIGINS=SHOP
    )


@pytest.fixture(scope="module")
def default_server(server_factory):
    return server_factory.start(CSRF_TRUSTED_ORIGINS=SHOP)


async def test_a_login_sets_a_samesite_none_secure_session_cookie(cross_site_server, make_user):
    status, cookies = await sign_in(cross_site_server, make_user(), SHOP)
    assert status == 200, cookies
    session, header = cookies[settings.SESSION_COOKIE_NAME]
    assert session["samesite"] == "None" and session["secure"] is True, header
    assert session["httponly"] is True, header
    # The CSRF cookie is left Lax: nothing another site's page calls reads it.
    if settings.CSRF_COOKIE_NAME in cookies:
        csrf, header = cookies[settings.CSRF_COOKIE_NAME]
        assert csrf["samesite"] == "Lax", header


async def test_without_the_setting_the_session_cookie_is_lax_and_not_secure(default_server, make_user):
    status, cookies = await sign_in(default_server, make_user(), SHOP)
    assert status == 200, cookies
    session, header = cookies[settings.SESSION_COOKIE_NAME]
    assert session["samesite"] == "Lax" and not session["secure"], header


async def test_another_sites_page_still_cannot_use_the_cross_site_cookie(cross_site_server, make_user):
    """The cookie now goes with any site's requests: the Origin checks are what stop them."""
    user = make_user()
    status, cookies = await sign_in(cross_site_server, user, EVIL)
    assert status == 403 and settings.SESSION_COOKIE_NAME not in cookies, (status, cookies)

    status, cookies = await sign_in(cross_site_server, user, SHOP)
    assert status == 200, cookies
    session, _ = cookies[settings.SESSION_COOKIE_NAME]
    cookie = f"{settings.SESSION_COOKIE_NAME}={session.value}"
    url = cross_site_server.url
    other_port = url.rsplit(":", 1)[0] + ":1"
    ws_url = url.replace("http", "ws", 1) + "/ws/socket.io/?EIO=4&transport=websocket"
    polling = f"{url}/ws/socket.io/?EIO=4&transport=polling"
    async with aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar()) as http:
        for origin in (EVIL, other_port, "null"):
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await http.ws_connect(ws_url, headers={"Origin": origin, "Cookie": cookie})
            # 403 from the Origin check; daphne's WebSocket layer answers ``null`` 400 before it.
            assert refused.value.status in (400, 403), (origin, refused.value)
            async with http.get(polling, headers={"Origin": origin, "Cookie": cookie}) as answer:
                assert answer.status == 403, (origin, answer.status, await answer.text())
            async with http.get(f"{url}{P}/user", headers={"Origin": origin, "Cookie": cookie}) as answer:
                # The browser lets that page read nothing: no CORS header names it.
                assert "Access-Control-Allow-Origin" not in answer.headers, (origin, dict(answer.headers))
        # The trusted other site's page: the socket opens and its reads are allowed.
        socket = await http.ws_connect(ws_url, headers={"Origin": SHOP, "Cookie": cookie})
        try:
            opened = await socket.receive_str(timeout=20)
            assert opened.startswith("0{"), opened  # Engine.IO's open packet
        finally:
            await socket.close()
        async with http.get(f"{url}{P}/user", headers={"Origin": SHOP, "Cookie": cookie}) as answer:
            assert answer.status == 200, await answer.text()
            assert answer.headers.get("Access-Control-Allow-Origin") == SHOP, dict(answer.headers)
            assert answer.headers.get("Access-Control-Allow-Credentials") == "true"
            assert (await answer.json())["identifier"] == user.username
