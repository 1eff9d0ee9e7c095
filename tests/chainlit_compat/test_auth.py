"""Signing in as Chainlit's frontend does, at Chainlit's paths under CHAINLIT_PATH_PREFIX:
auth config, login (a form, as its login page posts it), user, logout, header auth, the
sticky-session cookie call; unsafe requests checked by Origin instead of a CSRF token."""

from typing import Any

import pytest
from django.conf import settings
from django.test import Client

pytestmark = pytest.mark.django_db(transaction=True)

P = settings.CHAINLIT_PATH_PREFIX
OURS = "http://testserver"


def browser() -> Client:
    """A client that sends what a browser's fetch sends: Origin on unsafe requests."""
    return Client(HTTP_ORIGIN=OURS, enforce_csrf_checks=True)


def sign_in(client: Client, username: str, password: str) -> Any:
    return client.post(f"{P}/login", {"username": username, "password": password})


@pytest.fixture
def password_app(settings):
    settings.CHAT_APP = "tests.apps.chainlit_style.password_auth"


@pytest.fixture
def header_app(settings):
    settings.CHAT_APP = "tests.apps.chainlit_style.header_auth"


def test_auth_config_has_chainlits_keys():
    response = Client().get(f"{P}/auth/config")
    assert response.status_code == 200, response.content
    body = response.json()
    assert {"requireLogin", "passwordAuth", "headerAuth", "oauthProviders", "default_theme", "ui"} <= set(
        body
    )
    assert body["requireLogin"] is True and body["passwordAuth"] is True
    assert body["headerAuth"] is False and body["oauthProviders"] == []


def test_the_login_form_signs_in_with_a_session_cookie_without_a_csrf_token(user):
    client = browser()
    assert client.get(f"{P}/user").status_code == 401
    response = sign_in(client, "owner", "pw-for-tests-1")
    assert response.status_code == 200, response.content
    assert response.json() == {"success": True}
    assert settings.SESSION_COOKIE_NAME in response.cookies
    me = client.get(f"{P}/user")
    assert me.status_code == 200, me.content
    body = me.json()
    assert body["identifier"] == "owner" and body["id"] == str(user.pk)
    assert set(body) == {"id", "identifier", "display_name", "metadata", "createdAt"}
    assert body["createdAt"].endswith("Z")


def test_a_wrong_password_is_a_401_with_chainlits_error_key(user):
    response = sign_in(browser(), "owner", "wrong")
    assert response.status_code == 401
    assert response.json() == {"detail": "credentialssignin"}
    assert sign_in(browser(), "", "").status_code == 401


def test_a_login_from_another_sites_page_is_refused(user):
    client = Client(HTTP_ORIGIN="http://evil.example")
    response = sign_in(client, "owner", "pw-for-tests-1")
    assert response.status_code == 403, response.content
    assert settings.SESSION_COOKIE_NAME not in response.cookies


def test_logout_signs_out_and_another_origin_cannot_sign_you_out(user):
    client = browser()
    sign_in(client, "owner", "pw-for-tests-1")
    client.defaults["HTTP_ORIGIN"] = "http://evil.example"
    assert client.post(f"{P}/logout", {}, content_type="application/json").status_code == 403
    assert client.get(f"{P}/user").status_code == 200
    client.defaults["HTTP_ORIGIN"] = OURS
    response = client.post(f"{P}/logout", {}, content_type="application/json")
    assert response.status_code == 200 and response.json() == {"success": True}
    assert client.get(f"{P}/user").status_code == 401


def test_the_locked_out_pair_gets_429_here_too(user):
    client = browser()
    for _ in range(4):
        assert sign_in(client, "owner", "guess").status_code == 401
    assert sign_in(client, "owner", "guess").status_code == 429
    assert sign_in(client, "owner", "pw-for-tests-1").status_code == 429


def test_the_apps_password_callback_signs_in_through_chainlits_login(password_app):
    client = browser()
    assert client.get(f"{P}/auth/config").json()["headerAuth"] is False
    assert sign_in(client, "ada", "wrong").status_code == 401
    assert sign_in(client, "ada", "analytical-engine-1843").status_code == 200
    me = client.get(f"{P}/user").json()
    assert (me["identifier"], me["display_name"]) == ("ada", "Ada L.")


def test_header_auth_signs_in_the_browser_the_apps_callback_names(header_app):
    client = browser()
    assert client.get(f"{P}/auth/config").json()["headerAuth"] is True
    assert client.post(f"{P}/auth/header", {}, content_type="application/json").status_code == 401
    response = client.post(
        f"{P}/auth/header", {}, content_type="application/json", HTTP_TEST_HEADER="test-value"
    )
    assert response.status_code == 200, response.content
    assert response.json() == {"success": True}
    assert client.get(f"{P}/user").json()["identifier"] == "header-user"


def test_header_auth_without_a_callback_is_a_400():
    response = browser().post(f"{P}/auth/header", {}, content_type="application/json")
    assert response.status_code == 400


def test_set_session_cookie_answers_as_chainlit_does():
    response = browser().post(
        f"{P}/set-session-cookie", {"session_id": "abc"}, content_type="application/json"
    )
    assert response.status_code == 200
    assert response.json() == {"message": "Session cookie set"}


def test_the_copilots_bearer_is_a_tether_api_token(user, other_user):
    from rest_framework.authtoken.models import Token

    from sessions_app.tokens import issue

    client = browser()
    key = issue(user).key
    assert client.post(f"{P}/auth/jwt", HTTP_AUTHORIZATION="Bearer not-a-token").status_code == 401
    assert client.post(f"{P}/auth/jwt").status_code == 401
    assert client.post(f"{P}/auth/jwt", HTTP_AUTHORIZATION=f"Token {key}").status_code == 401
    response = client.post(f"{P}/auth/jwt", HTTP_AUTHORIZATION=f"Bearer {key}")
    assert response.status_code == 200 and response.json() == {"success": True}
    assert client.get(f"{P}/user").json()["identifier"] == "owner"
    Token.objects.filter(user=user).delete()  # revoked: no new sign-in
    assert browser().post(f"{P}/auth/jwt", HTTP_AUTHORIZATION=f"Bearer {key}").status_code == 401
    admin = type(user).objects.create_superuser("root", password="pw-for-tests-1")
    assert browser().post(f"{P}/auth/jwt", HTTP_AUTHORIZATION=f"Bearer {issue(admin).key}").status_code == 401
    evil = Client(HTTP_ORIGIN="http://evil.example")
    assert evil.post(f"{P}/auth/jwt", HTTP_AUTHORIZATION=f"Bearer {issue(other_user).key}").status_code == 403
