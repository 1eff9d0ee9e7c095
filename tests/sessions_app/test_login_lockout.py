"""Login throttling (django-axes): after LOGIN_FAILURE_LIMIT wrong passwords for one username
from one address, that pair is locked out, even with the right password; other users behind
the same address are not."""

import re

import aiohttp
import pytest
from django.test import Client

pytestmark = pytest.mark.django_db(transaction=True)

LIMIT = 5


def attempt(client: Client, username: str, password: str) -> int:
    return client.post("/accounts/login/", {"username": username, "password": password}).status_code


def test_a_locked_out_pair_cannot_log_in_even_with_the_right_password(user, other_user):
    client = Client()
    for _ in range(LIMIT - 1):
        assert attempt(client, "owner", "wrong-guess") == 200  # the form again, with an error
    assert attempt(client, "owner", "wrong-guess") == 429
    assert attempt(client, "owner", "pw-for-tests-1") == 429
    # Another user from the same address signs in.
    assert attempt(Client(), "intruder", "pw-for-tests-1") == 302
    # The same user from another address too: nobody can lock a user out from afar.
    assert attempt(Client(REMOTE_ADDR="203.0.113.9"), "owner", "pw-for-tests-1") == 302


def test_a_success_resets_the_count(user):
    client = Client()
    for _ in range(LIMIT - 1):
        attempt(client, "owner", "wrong-guess")
    assert attempt(client, "owner", "pw-for-tests-1") == 302
    for _ in range(LIMIT - 1):
        assert attempt(Client(), "owner", "wrong-guess") == 200


async def login_status(base_url: str, username: str, password: str) -> int:
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
        async with http.get(f"{base_url}/accounts/login/") as response:
            csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', await response.text())
        assert csrf
        async with http.post(
            f"{base_url}/accounts/login/",
            data={"username": username, "password": password, "csrfmiddlewaretoken": csrf.group(1)},
            allow_redirects=False,
        ) as response:
            return response.status


@pytest.mark.abuse
async def test_thirty_wrong_passwords_then_the_right_one_is_refused(server, make_user):
    """Before: 30 wrong passwords, then the right one logged in."""
    victim = make_user()
    bystander = make_user()
    statuses = [await login_status(server.url, victim.username, f"guess-{i}") for i in range(30)]
    assert statuses[: LIMIT - 1] == [200] * (LIMIT - 1) and set(statuses[LIMIT - 1 :]) == {429}
    assert await login_status(server.url, victim.username, victim.raw_password) == 429
    assert await login_status(server.url, bystander.username, bystander.raw_password) == 302
