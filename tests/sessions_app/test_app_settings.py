"""``@chat.set_starters`` and ``@chat.set_chat_profiles``: the registry, and what
``sessions_app.app_settings`` makes of what an app returns (checked, capped, a failure logged
as an empty list), and which profile a new chat gets."""

import asyncio
import logging
from types import SimpleNamespace
from typing import Any

import pytest
from django.conf import settings as django_settings

from sessions_app import app_settings, chat
from sessions_app.app_settings import choose_profile
from sessions_app.chat.hooks import load_app, registry

USER: Any = SimpleNamespace(get_username=lambda: "ada")


@pytest.fixture
def fresh_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hooks this module registers are undone after each test (the configured app is
    loaded first, so that ``load_app`` does not load it over them)."""
    load_app()
    monkeypatch.setattr(registry, "set_starters", None)
    monkeypatch.setattr(registry, "set_chat_profiles", None)


@pytest.fixture
def example_app(settings: Any) -> None:
    settings.CHAT_APP = "examples.profiles_app"
    load_app()


def test_the_decorators_register_the_function_and_return_it(fresh_registry: None) -> None:
    async def starters() -> list[chat.Starter]:
        return []

    async def profiles() -> list[chat.ChatProfile]:
        return []

    assert chat.set_starters(starters) is starters
    assert chat.set_chat_profiles(profiles) is profiles
    assert registry.set_starters is starters
    assert registry.set_chat_profiles is profiles


def test_loading_an_app_fills_the_registry_and_another_app_clears_it(settings: Any) -> None:
    settings.CHAT_APP = "examples.profiles_app"
    assert load_app().set_starters is not None
    assert load_app().set_chat_profiles is not None
    settings.CHAT_APP = "examples.notes_app"
    assert load_app().set_starters is None
    assert load_app().set_chat_profiles is None


def test_starter_and_profile_serialise_with_chainlits_field_names() -> None:
    starter = chat.Starter("Say hi", "Hello", icon="/static/hi.svg")
    assert starter.to_dict() == {"label": "Say hi", "message": "Hello", "icon": "/static/hi.svg"}
    profile = chat.ChatProfile("Fast", "Quick **answers**", default=True, starters=[starter])
    assert profile.to_dict() == {
        "name": "Fast",
        "display_name": None,
        "markdown_description": "Quick **answers**",
        "icon": None,
        "default": True,
        "starters": [starter.to_dict()],
    }
    assert chat.ChatProfile("Plain", "").to_dict()["starters"] is None
    # Past the icon, fields are named: Chainlit's positional order would set the wrong one.
    with pytest.raises(TypeError):
        chat.ChatProfile("Fast", "", None, "Fast and cheap")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        chat.Starter("Say hi", "Hello", "/command")  # type: ignore[call-arg]


async def test_the_hook_gets_the_user_when_it_takes_one(fresh_registry: None) -> None:
    seen: list[Any] = []

    @chat.set_starters
    async def with_user(user: Any) -> list[chat.Starter]:
        seen.append(user)
        return [chat.Starter(f"Hi {user.get_username()}", "hello")]

    assert [s.label for s in await app_settings.app_starters(USER)] == ["Hi ada"]

    @chat.set_starters
    async def without_user() -> list[chat.Starter]:
        return [chat.Starter("Hi", "hello")]

    assert [s.label for s in await app_settings.app_starters(USER)] == ["Hi"]

    @chat.set_starters
    async def with_user_and_language(user: Any, language: str) -> list[chat.Starter]:
        seen.append(language)
        return []

    await app_settings.app_starters(USER)
    assert seen == [USER, django_settings.LANGUAGE_CODE] == [USER, "en"]  # the site's default


async def test_a_failing_hook_is_logged_and_reads_as_no_starters(
    fresh_registry: None, caplog: pytest.LogCaptureFixture
) -> None:
    @chat.set_starters
    async def broken() -> list[chat.Starter]:
        raise RuntimeError("the starters database is down")

    @chat.set_chat_profiles
    async def also_broken() -> list[chat.ChatProfile]:
        raise KeyError("role")

    with caplog.at_level(logging.ERROR, logger="sessions_app.app_settings"):
        assert await app_settings.app_starters(USER) == []
        assert await app_settings.app_chat_profiles(USER) == []
    messages = [r.getMessage() for r in caplog.records]
    assert "set_starters of the chat app failed; none are shown" in messages
    assert "set_chat_profiles of the chat app failed; none are shown" in messages
    assert any("the starters database is down" in (r.exc_text or "") for r in caplog.records)


async def test_a_hanging_hook_times_out_as_no_starters(
    fresh_registry: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(app_settings, "HOOK_TIMEOUT", 0.05)

    @chat.set_starters
    async def hangs() -> list[chat.Starter]:
        await asyncio.sleep(60)
        return []

    with caplog.at_level(logging.ERROR, logger="sessions_app.app_settings"):
        assert await app_settings.app_starters(USER) == []
    assert "took longer than 0.05 s" in caplog.text


async def test_what_is_not_a_list_of_starters_is_dropped_with_the_reason(
    fresh_registry: None, caplog: pytest.LogCaptureFixture
) -> None:
    @chat.set_starters
    async def odd() -> Any:
        return [
            chat.Starter("Good", "kept"),
            {"label": "a dict", "message": "not a Starter"},
            chat.Starter("", "no label"),
            chat.Starter("NUL", "a\x00b"),
            chat.Starter("Long", "x" * 200_000),
        ]

    with caplog.at_level(logging.ERROR, logger="sessions_app.app_settings"):
        assert [s.label for s in await app_settings.app_starters(USER)] == ["Good"]
    assert "item 1 is dropped: dict is not a chat.Starter" in caplog.text
    assert "item 2 is dropped: label must be a non-empty string" in caplog.text
    assert "item 3 is dropped: message contains a NUL character" in caplog.text
    assert "item 4 is dropped: message is longer than" in caplog.text

    @chat.set_starters
    async def not_a_list() -> Any:
        return "Say hi"

    assert await app_settings.app_starters(USER) == []
    assert "the app returned str, not a list" in caplog.text


async def test_an_icon_that_is_not_a_path_on_this_server_is_dropped_and_its_item_kept(
    fresh_registry: None, caplog: pytest.LogCaptureFixture
) -> None:
    @chat.set_starters
    async def starters() -> list[chat.Starter]:
        return [
            chat.Starter("Own", "m", icon="/static/hi.svg"),
            chat.Starter("Protocol-relative", "m", icon="//evil.example/x.png"),
            chat.Starter("Backslash", "m", icon="/\\evil.example/x.png"),
            chat.Starter("Tab", "m", icon="/\t/evil.example/x.png"),
            chat.Starter("Remote", "m", icon="https://evil.example/x.png"),
        ]

    @chat.set_chat_profiles
    async def profiles() -> list[chat.ChatProfile]:
        return [
            chat.ChatProfile("A", "", icon="//evil.example/a.png"),
            chat.ChatProfile("B", "", icon="/b.png"),
        ]

    with caplog.at_level(logging.WARNING, logger="sessions_app.app_settings"):
        found = await app_settings.app_starters(USER)
        chosen = await app_settings.app_chat_profiles(USER)
    assert [(s.label, s.icon) for s in found] == [
        ("Own", "/static/hi.svg"),
        ("Protocol-relative", None),
        ("Backslash", None),
        ("Tab", None),
        ("Remote", None),
    ]
    assert [(p.name, p.icon) for p in chosen] == [("A", None), ("B", "/b.png")]
    assert "starter 'Backslash': icon '/\\\\evil.example/x.png' is dropped" in caplog.text
    assert "profile 'A': icon '//evil.example/a.png' is dropped" in caplog.text


async def test_the_lists_are_capped_and_profile_names_are_unique(
    fresh_registry: None, caplog: pytest.LogCaptureFixture
) -> None:
    @chat.set_starters
    async def many() -> list[chat.Starter]:
        return [chat.Starter(f"s{i}", "m") for i in range(50)]

    @chat.set_chat_profiles
    async def profiles() -> list[chat.ChatProfile]:
        return [
            chat.ChatProfile("A", "first"),
            chat.ChatProfile("A", "second of the same name"),
            chat.ChatProfile("B", "", starters=[chat.Starter(f"b{i}", "m") for i in range(30)]),
            chat.ChatProfile("x" * 256, "a name too long to store"),
        ]

    starters = await app_settings.app_starters(USER)
    assert [s.label for s in starters] == [f"s{i}" for i in range(app_settings.MAX_STARTERS)]
    found = await app_settings.app_chat_profiles(USER)
    assert [p.name for p in found] == ["A", "B"]
    assert found[0].markdown_description == "first"
    assert len(found[1].starters or []) == app_settings.MAX_STARTERS
    assert "a second profile named 'A' is dropped" in caplog.text


def test_a_new_chat_gets_the_profile_it_asks_for_or_the_default() -> None:
    profiles = [chat.ChatProfile("A", ""), chat.ChatProfile("B", "", default=True), chat.ChatProfile("C", "")]
    assert choose_profile(profiles, "C") == "C"
    assert choose_profile(profiles, "") == "B"  # none asked: the default
    assert choose_profile(profiles, "Z") == "B"  # unknown: the default, as Chainlit's client does
    assert choose_profile(profiles, "c") == "B"  # names are exact
    assert choose_profile(profiles[:1] + profiles[2:], "Z") == "A"  # no default marked: the first
    assert choose_profile([], "anything") == "anything"  # no profiles: kept as given


async def test_project_settings_of_the_example_app(example_app: None) -> None:
    found = (await app_settings.project_settings(USER)).to_dict()
    assert [p["name"] for p in found["chatProfiles"]] == ["Echo", "Reverse"]
    assert found["chatProfile"] == "Echo"  # the default
    assert [s["label"] for s in found["starters"]] == ["Say hello", "Ask the time"]
    assert found["starters"][1]["message"] == "What time is it, ada?"

    reverse = (await app_settings.project_settings(USER, "Reverse")).to_dict()
    assert reverse["chatProfile"] == "Reverse"
    # The chosen profile's own starters replace the app's.
    assert [s["message"] for s in reverse["starters"]] == ["stressed", "racecar"]
    assert (await app_settings.project_settings(USER, "Nope")).chat_profile == "Echo"
    assert await app_settings.resolve_chat_profile(USER, "Nope") == "Echo"
    assert await app_settings.resolve_chat_profile(USER, "Reverse") == "Reverse"


async def test_without_profiles_the_requested_name_is_kept(settings: Any) -> None:
    settings.CHAT_APP = "examples.notes_app"
    assert await app_settings.resolve_chat_profile(USER, "Whatever") == "Whatever"
    found = (await app_settings.project_settings(USER, "")).to_dict()
    assert found == {"chatProfiles": [], "chatProfile": "", "starters": []}
