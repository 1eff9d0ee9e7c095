"""``manage.py create_chat_user``: a user with a box and an API token."""

import re
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone
from rest_framework.authtoken.models import Token

from threads_app.models import Box

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = StringIO()
    call_command("create_chat_user", *args, stdout=out)
    return out.getvalue()


def printed_token(output: str) -> str:
    match = re.search(r"^token: (\S+)$", output, flags=re.M)
    assert match is not None, output
    return match.group(1)


def test_creates_user_box_and_token_and_prints_the_token(django_user_model):
    output = run("integrator")

    user = django_user_model.objects.get(username="integrator")
    token = Token.objects.get(user=user)
    assert printed_token(output) == token.key
    assert "user: integrator" in output
    assert list(Box.objects.filter(owner=user).values_list("name", flat=True)) == ["default"]
    assert not user.has_usable_password()


def test_password_option_sets_a_usable_password(django_user_model):
    run("demo", "--password", "s3cret-pass")
    user = django_user_model.objects.get(username="demo")
    assert user.check_password("s3cret-pass")


def test_if_missing_is_idempotent(django_user_model):
    first = printed_token(run("bot", "--if-missing"))
    second = printed_token(run("bot", "--if-missing"))

    assert first == second
    assert django_user_model.objects.filter(username="bot").count() == 1
    user = django_user_model.objects.get(username="bot")
    assert Token.objects.filter(user=user).count() == 1
    assert Box.objects.filter(owner=user).count() == 1


def test_if_missing_on_an_existing_user_gives_them_a_box_and_token(django_user_model):
    user = django_user_model.objects.create_user(username="legacy", password="pw-for-tests-1")

    token = printed_token(run("legacy", "--if-missing"))

    assert Token.objects.get(user=user).key == token
    assert Box.objects.filter(owner=user, name="default").exists()
    user.refresh_from_db()
    assert user.check_password("pw-for-tests-1")  # the existing password is untouched


def test_second_call_without_if_missing_errors(django_user_model):
    token = printed_token(run("twice"))

    with pytest.raises(CommandError, match="already exists"):
        run("twice")

    user = django_user_model.objects.get(username="twice")
    assert Token.objects.get(user=user).key == token
    assert django_user_model.objects.filter(username="twice").count() == 1


@pytest.mark.parametrize(
    ("password", "reason"),
    [
        ("short1", "too short"),
        ("password123", "too common"),
        ("84736251907", "entirely numeric"),
        ("alexander-the-great", "too similar to the username"),
    ],
)
def test_weak_passwords_are_refused_with_the_validators_reasons(django_user_model, password, reason):
    with pytest.raises(CommandError, match=f"password refused: .*{reason}"):
        run("alexander-the-great", "--password", password)
    assert not django_user_model.objects.filter(username="alexander-the-great").exists()


def test_the_demo_password_of_the_makefile_passes(django_user_model):
    run("demo", "--password", "demo-password", "--if-missing")
    assert django_user_model.objects.get(username="demo").check_password("demo-password")


def test_if_missing_renews_an_expired_token(django_user_model, settings):
    settings.API_TOKEN_LIFETIME_DAYS = 30
    first = printed_token(run("bot", "--if-missing"))
    Token.objects.filter(key=first).update(created=timezone.now() - timedelta(days=31))
    second = printed_token(run("bot", "--if-missing"))
    assert second != first and Token.objects.filter(user__username="bot").count() == 1
