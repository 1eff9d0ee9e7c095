"""API tokens expire after API_TOKEN_LIFETIME_DAYS and can be revoked (admin, command), on the
API and on the socket alike."""

from datetime import timedelta
from io import StringIO

import pytest
from asgiref.sync import async_to_sync
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from sessions_app import tokens
from sessions_app.auth import user_for_token

pytestmark = pytest.mark.django_db


def age(token: Token, days: float) -> None:
    Token.objects.filter(pk=token.pk).update(created=timezone.now() - timedelta(days=days))


def threads_with(key: str) -> int:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return api.get("/api/threads/").status_code


# The socket's lookup closes the thread's connection: a transactional database.
@pytest.mark.django_db(transaction=True)
def test_a_token_past_its_lifetime_is_refused_on_the_api_and_the_socket(user, settings):
    settings.API_TOKEN_LIFETIME_DAYS = 30
    token = Token.objects.create(user=user)
    assert threads_with(token.key) == 200
    assert async_to_sync(user_for_token)(token.key) == user
    age(token, 31)
    assert threads_with(token.key) == 401
    assert async_to_sync(user_for_token)(token.key) is None
    settings.API_TOKEN_LIFETIME_DAYS = 0  # never expire
    assert threads_with(token.key) == 200


def test_the_api_says_why(user, settings):
    settings.API_TOKEN_LIFETIME_DAYS = 1
    token = Token.objects.create(user=user)
    age(token, 2)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    assert api.get("/api/threads/").json() == {"detail": "Token has expired."}


def revoke(*args: str) -> str:
    out = StringIO()
    call_command("revoke_tokens", *args, stdout=out)
    return out.getvalue()


# The socket's lookup closes the thread's connection: a transactional database.
@pytest.mark.django_db(transaction=True)
def test_revoke_tokens_by_user_and_expired(user, other_user, django_user_model, settings):
    settings.API_TOKEN_LIFETIME_DAYS = 30
    mine, theirs = Token.objects.create(user=user), Token.objects.create(user=other_user)
    old = Token.objects.create(user=django_user_model.objects.create_user("old", password="pw-for-tests-1"))
    age(old, 40)
    assert revoke("owner") == "revoked 1 token(s)\n"
    assert threads_with(mine.key) == 401 and threads_with(theirs.key) == 200
    assert async_to_sync(user_for_token)(mine.key) is None
    assert revoke("--expired") == "revoked 1 token(s)\n"
    assert set(Token.objects.values_list("key", flat=True)) == {theirs.key}
    with pytest.raises(CommandError, match="no such user: nobody"):
        revoke("nobody")
    with pytest.raises(CommandError, match="--expired"):
        revoke()


def test_the_admin_revokes_the_tokens_of_selected_users(client, user, other_user, django_user_model):
    admin = django_user_model.objects.create_superuser("root", password="pw-for-tests-1")
    client.force_login(admin)
    mine, theirs = Token.objects.create(user=user), Token.objects.create(user=other_user)
    response = client.post(
        "/admin/auth/user/", {"action": "revoke_api_tokens", "_selected_action": [user.pk]}, follow=True
    )
    assert response.status_code == 200 and b"Revoked 1 API token(s)." in response.content
    assert list(Token.objects.values_list("key", flat=True)) == [theirs.key]
    assert not Token.objects.filter(key=mine.key).exists()
    tokens_page = client.get("/admin/authtoken/tokenproxy/")
    assert tokens_page.status_code == 200 and b"expires" in tokens_page.content


def test_issue_replaces_an_expired_token(user, settings):
    settings.API_TOKEN_LIFETIME_DAYS = 30
    first = tokens.issue(user)
    assert tokens.issue(user).key == first.key
    age(first, 31)
    renewed = tokens.issue(user)
    assert renewed.key != first.key and not tokens.is_expired(renewed)
