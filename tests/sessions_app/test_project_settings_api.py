"""``GET /api/project/settings``: the app's chat profiles and the starters an empty chat shows,
for the signed-in user only; a failing app hook is an empty list, never a 500."""

import logging
from typing import Any

import pytest
from django.test import Client
from rest_framework.authtoken.models import Token

from sessions_app import chat
from sessions_app.chat.hooks import load_app, registry

pytestmark = pytest.mark.django_db

URL = "/api/project/settings"


@pytest.fixture
def example_app(settings: Any) -> None:
    settings.CHAT_APP = "examples.profiles_app"
    load_app()


@pytest.fixture
def signed_in(client: Client, user: Any) -> Client:
    client.force_login(user)
    return client


def test_it_needs_credentials(client: Client, example_app: None) -> None:
    response = client.get(URL)
    assert response.status_code == 401
    assert set(response.json()) == {"detail"}


def test_the_example_apps_profiles_and_its_starters(signed_in: Client, example_app: None) -> None:
    response = signed_in.get(URL)
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"chatProfiles", "chatProfile", "starters"}
    assert body["chatProfile"] == "Echo"
    assert body["chatProfiles"][0] == {
        "name": "Echo",
        "display_name": None,
        "markdown_description": "Repeats what you say.",
        "icon": None,
        "default": True,
        "starters": None,
    }
    assert [p["name"] for p in body["chatProfiles"]] == ["Echo", "Reverse"]
    # The starters are the user's: the hook got the signed-in user.
    assert body["starters"] == [
        {"label": "Say hello", "message": "Hello there", "icon": None},
        {"label": "Ask the time", "message": "What time is it, owner?", "icon": None},
    ]


def test_a_profiles_own_starters_replace_the_apps(signed_in: Client, example_app: None) -> None:
    body = signed_in.get(URL, {"chat_profile": "Reverse"}).json()
    assert body["chatProfile"] == "Reverse"
    assert [s["label"] for s in body["starters"]] == ["Reverse a word", "Reverse a palindrome"]
    # A profile without its own starters shows the app's.
    assert [s["label"] for s in signed_in.get(URL, {"chat_profile": "Echo"}).json()["starters"]] == [
        "Say hello",
        "Ask the time",
    ]


def test_an_unknown_profile_reads_as_the_default(signed_in: Client, example_app: None) -> None:
    body = signed_in.get(URL, {"chat_profile": "Admin"}).json()
    assert body["chatProfile"] == "Echo"
    assert [s["label"] for s in body["starters"]] == ["Say hello", "Ask the time"]


def test_a_token_works_too_and_an_overlong_profile_is_a_400(
    client: Client, user: Any, example_app: None
) -> None:
    token = Token.objects.create(user=user)
    headers = {"Authorization": f"Token {token.key}"}
    assert client.get(URL, headers=headers).status_code == 200
    response = client.get(URL, {"chat_profile": "x" * 256}, headers=headers)
    assert response.status_code == 400
    assert "chat_profile" in response.json()


def test_a_failing_hook_is_an_empty_list_and_a_clear_log_line(
    signed_in: Client, example_app: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken(user: Any) -> list[chat.Starter]:
        raise RuntimeError("no starters today")

    monkeypatch.setattr(registry, "set_starters", broken)
    monkeypatch.setattr(registry, "set_chat_profiles", broken)
    with caplog.at_level(logging.ERROR, logger="sessions_app.app_settings"):
        response = signed_in.get(URL)
    assert response.status_code == 200
    assert response.json() == {"chatProfiles": [], "chatProfile": "", "starters": []}
    assert "set_starters of the chat app failed; none are shown" in caplog.text
    assert "set_chat_profiles of the chat app failed; none are shown" in caplog.text


def test_an_app_without_starters_or_profiles(signed_in: Client, settings: Any) -> None:
    settings.CHAT_APP = "examples.notes_app"
    assert signed_in.get(URL).json() == {"chatProfiles": [], "chatProfile": "", "starters": []}


def test_the_engine_runtimes_starters_come_from_the_setting(signed_in: Client, settings: Any) -> None:
    settings.CHAT_APP = "sessions_app.default_app"
    settings.CHAT_STARTERS = [
        {"label": "Say hi", "message": "Hello!"},
        {"label": "Slow", "message": "!slow 0.1 take your time", "icon": "/static/tether/favicon.svg"},
    ]
    assert signed_in.get(URL).json()["starters"] == [
        {"label": "Say hi", "message": "Hello!", "icon": None},
        {"label": "Slow", "message": "!slow 0.1 take your time", "icon": "/static/tether/favicon.svg"},
    ]
    settings.CHAT_STARTERS = []
    assert signed_in.get(URL).json()["starters"] == []


def test_it_is_in_the_openapi_schema(client: Client) -> None:
    schema = client.get("/api/schema/", {"format": "json"}).json()
    operation = schema["paths"]["/api/project/settings"]["get"]
    assert set(operation["responses"]) == {"200", "400", "401"}
    body = schema["components"]["schemas"]["ProjectSettings"]
    assert set(body["required"]) == {"chatProfiles", "chatProfile", "starters"}
