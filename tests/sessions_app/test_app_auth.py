"""The app's sign-in callbacks on a real daphne server (``tests/apps/chainlit_style/``):
``password_auth_callback`` on the login page, ``header_auth_callback`` on a signed-out
browser's request, ``oauth_callback`` registered and never called; who the socket's hooks
then see as ``cl.context.session.user``."""

import re
from typing import Any

import aiohttp
import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User

from tests.support.client import ChatClient, login_cookie

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def password_server(server_factory):
    return server_factory.start(CHAT_APP="tests.apps.chainlit_style.password_auth")


@pytest.fixture(scope="module")
def header_server(server_factory):
    return server_factory.start(CHAT_APP="tests.apps.chainlit_style.header_auth")


@pytest.fixture(scope="module")
def oauth_server(server_factory):
    return server_factory.start(CHAT_APP="tests.apps.chainlit_style.oauth_app")


async def greeting(server: Any, cookie: str) -> str:
    """What on_chat_start says to a socket with ``cookie``."""
    client = ChatClient(server.url, cookie)
    await client.start()
    try:
        await client.wait_for(lambda c: any(t.startswith(("signed in", "echo")) for t in c.texts()), 20)
    except TimeoutError:
        pytest.fail(f"no greeting; events: {client.events!r}")
    finally:
        await client.disconnect()
    return next(t for t in client.texts() if t.startswith("signed in"))


async def login_answer(server: Any, username: str, password: str) -> tuple[int, list[str]]:
    """The login page's answer to a form post: its status and the cookies it set."""
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
        async with http.get(f"{server.url}/accounts/login/") as response:
            csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', await response.text())
        assert csrf, "login page has no CSRF token"
        async with http.post(
            f"{server.url}/accounts/login/",
            data={"username": username, "password": password, "csrfmiddlewaretoken": csrf.group(1)},
            allow_redirects=False,
        ) as response:
            return response.status, [c.key for c in http.cookie_jar]


async def test_the_password_callback_signs_in_the_user_it_returns(password_server):
    cookie = await login_cookie(password_server.url, "ada", "analytical-engine-1843")
    assert await greeting(password_server, cookie) == "signed in as ada (Ada L.)"
    account = await sync_to_async(User.objects.get)(username="ada")
    assert not account.has_usable_password(), "the app's user got a password of Tether's"


async def test_the_password_callback_refusing_means_no_sign_in(password_server):
    status, cookies = await login_answer(password_server, "ada", "a wrong password")
    assert status == 200 and "sessionid" not in cookies, (status, cookies)


async def test_the_password_callback_cannot_sign_in_as_an_admin_account(password_server, make_user):
    admin = make_user("root-by-app")
    await sync_to_async(User.objects.filter(pk=admin.pk).update)(is_staff=True, is_superuser=True)
    status, cookies = await login_answer(password_server, "root-by-app", "any")
    assert status == 200 and "sessionid" not in cookies, (status, cookies)
    assert "named the account 'root-by-app', which is staff" in password_server.log_path.read_text()


async def test_accounts_with_a_password_of_their_own_still_sign_in(password_server, make_user):
    user = make_user()
    cookie = await login_cookie(password_server.url, user.username, user.raw_password)
    assert await greeting(password_server, cookie) == f"signed in as {user.username} (None)"


async def test_the_header_callback_signs_a_browser_in_from_its_headers(header_server):
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
        async with http.get(f"{header_server.url}/", allow_redirects=False) as response:
            assert response.status == 302, f"signed in without the header: {response.status}"
        async with http.get(
            f"{header_server.url}/", headers={"test-header": "test-value"}, allow_redirects=False
        ) as response:
            assert response.status == 200, f"the header did not sign in: {response.status}"
        cookie = "; ".join(f"{c.key}={c.value}" for c in http.cookie_jar)
    assert "sessionid=" in cookie, cookie
    assert await greeting(header_server, cookie) == "signed in as header-user"


async def test_an_oauth_callback_is_accepted_never_called_and_said_so(oauth_server, make_user):
    user = make_user()
    client = ChatClient(
        oauth_server.url, await login_cookie(oauth_server.url, user.username, user.raw_password)
    )
    await client.start()
    await client.send("hi")
    try:
        await client.wait_text("echo hi", 20)
    except TimeoutError:
        pytest.fail(f"the app did not answer; events: {client.events!r}")
    await client.disconnect()
    assert (
        "is registered as oauth_callback, but Tether has no OAuth sign-in"
        in oauth_server.log_path.read_text()
    )
