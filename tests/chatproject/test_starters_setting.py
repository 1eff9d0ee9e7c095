"""``CHAT_STARTERS``, the default app's starters: a malformed value stops the server at start
with the reason, rather than showing no starters without a word."""

import json

import pytest

from tests.chatproject.test_settings_profile import manage


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("[{label: 'Say hi'}]", "CHAT_STARTERS is not JSON"),
        (json.dumps({"label": "Say hi", "message": "Hello"}), "CHAT_STARTERS must be a JSON list"),
        (json.dumps([{"label": "Say hi"}]), "CHAT_STARTERS must be a JSON list"),
        (json.dumps([{"label": "Say hi", "message": 3}]), "CHAT_STARTERS must be a JSON list"),
    ],
)
def test_a_malformed_value_is_refused_at_start(value: str, reason: str) -> None:
    result = manage("check", CHAT_STARTERS=value)
    assert result.returncode != 0
    assert reason in result.stderr


def test_a_list_of_starters_passes_the_check() -> None:
    value = json.dumps(
        [{"label": "Say hi", "message": "Hello"}, {"label": "A", "message": "B", "icon": None}]
    )
    result = manage("check", CHAT_STARTERS=value)
    assert result.returncode == 0, result.stderr
