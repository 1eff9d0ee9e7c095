"""What Chainlit's frontend reads before it opens the socket: project settings (the app's
profiles and starters, in Chainlit's shape) and translations (from a Chainlit build's files)."""

import json

import pytest
from django.test import Client

from tests.chainlit_compat.helpers import P, browser_of

pytestmark = pytest.mark.django_db(transaction=True)

SETTINGS_KEYS = {
    "ui",
    "features",
    "userEnv",
    "maskUserEnv",
    "dataPersistence",
    "threadResumable",
    "threadSharing",
    "markdown",
    "chatProfiles",
    "starters",
    "starterCategories",
    "debugUrl",
}


@pytest.fixture
def profiles_app(settings):
    settings.CHAT_APP = "examples.profiles_app"


def test_settings_carry_the_apps_profiles_and_starters_in_chainlits_shape(user, profiles_app):
    response = browser_of(user).get(f"{P}/project/settings", {"language": "en-US"})
    assert response.status_code == 200, response.content
    body = response.json()
    assert set(body) == SETTINGS_KEYS
    assert [p["name"] for p in body["chatProfiles"]] == ["Echo", "Reverse"]
    assert {"name", "display_name", "markdown_description", "icon", "default", "starters"} <= set(
        body["chatProfiles"][0]
    )
    assert [s["label"] for s in body["starters"]] == ["Say hello", "Ask the time"]
    assert body["starters"][1]["message"] == "What time is it, owner?"
    assert body["dataPersistence"] is True and body["threadResumable"] is True
    assert body["ui"]["name"] and body["features"]["spontaneous_file_upload"]["enabled"] is True
    assert body["features"]["audio"]["enabled"] is False


def test_a_profiles_own_starters(user, profiles_app):
    body = browser_of(user).get(f"{P}/project/settings", {"chat_profile": "Reverse"}).json()
    assert [s["label"] for s in body["starters"]] == ["Reverse a word", "Reverse a palindrome"]


def test_settings_need_a_signed_in_user_and_a_language_tag(user):
    assert Client().get(f"{P}/project/settings").status_code == 401
    assert browser_of(user).get(f"{P}/project/settings", {"language": "../../etc"}).status_code == 400


def test_translations_come_from_the_builds_files(settings, tmp_path):
    (tmp_path / "en-US.json").write_text(json.dumps({"common": {"actions": {"cancel": "Cancel"}}}))
    (tmp_path / "fr-FR.json").write_text(json.dumps({"common": {"actions": {"cancel": "Annuler"}}}))
    (tmp_path / "es.json").write_text(json.dumps({"common": {"actions": {"cancel": "Cancelar"}}}))
    settings.CHAINLIT_TRANSLATIONS_DIR = str(tmp_path)

    def cancel(language: str) -> str:
        response = Client().get(f"{P}/project/translations", {"language": language})
        assert response.status_code == 200, response.content
        assert set(response.json()) == {"translation"}
        return str(response.json()["translation"]["common"]["actions"]["cancel"])

    assert cancel("fr-FR") == "Annuler"
    assert cancel("fr-CA") == "Annuler"  # another region of the language
    assert cancel("es-MX") == "Cancelar"  # its base language
    assert cancel("de-DE") == "Cancel"  # en-US
    assert Client().get(f"{P}/project/translations", {"language": "../en-US"}).status_code == 400


def test_without_a_build_the_translation_is_empty(settings):
    settings.CHAINLIT_TRANSLATIONS_DIR = ""
    assert Client().get(f"{P}/project/translations").json() == {"translation": {}}
