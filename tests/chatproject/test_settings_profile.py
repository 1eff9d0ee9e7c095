"""Settings safe by default: a per-install key, no start with a known one, and a production
profile under which ``manage.py check --deploy`` is clean."""

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from chatproject import secret_key

ROOT = Path(__file__).resolve().parents[2]
STRONG = secret_key.generate()


def manage(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``manage.py`` in a fresh process with ``env`` on top of a clean environment."""
    base = {k: v for k, v in os.environ.items() if k not in {"SECRET_KEY", "DJANGO_ENV", "DEBUG"}}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_key_is_generated_once_private_and_kept(tmp_path):
    path = tmp_path / "var" / "secret_key"
    first = secret_key.load(path, create=True)
    assert secret_key.weakness(first) is None
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert secret_key.load(path, create=True) == first
    assert list(path.parent.iterdir()) == [path]  # no temporary file left behind


def test_without_create_a_missing_file_is_an_empty_key(tmp_path):
    assert secret_key.load(tmp_path / "nothing", create=False) == ""
    assert not (tmp_path / "nothing").exists()


@pytest.mark.parametrize(
    "key",
    ["", "tether-dev-secret-key-change-me-in-production", "django-insecure-" + "x1y2z3" * 10, "short-key"],
)
def test_known_empty_and_weak_keys_are_refused(key):
    with pytest.raises(ImproperlyConfigured, match="refusing to start"):
        secret_key.refuse_weak(key, "a test")


def test_the_server_refuses_to_start_with_the_old_public_key():
    refused = manage("check", SECRET_KEY="tether-dev-secret-key-change-me-in-production", DEBUG="0")
    assert refused.returncode != 0
    assert "public example key" in refused.stderr and "refusing to start" in refused.stderr
    empty = manage("check", SECRET_KEY="", DEBUG="0")
    assert empty.returncode != 0 and "SECRET_KEY is empty" in empty.stderr
    # DEBUG (a developer's own machine) may use any key.
    assert manage("check", SECRET_KEY="dev", DEBUG="1").returncode == 0


def test_the_production_profile_never_generates_a_key(tmp_path):
    missing = tmp_path / "secret_key"
    result = manage("check", DJANGO_ENV="production", SECRET_KEY_FILE=str(missing))
    assert result.returncode != 0 and "SECRET_KEY is empty" in result.stderr
    assert not missing.exists()


def test_check_deploy_is_clean_under_the_production_profile():
    result = manage(
        "check", "--deploy", "--fail-level", "WARNING", DJANGO_ENV="production", SECRET_KEY=STRONG
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_check_deploy_warns_without_the_production_profile():
    """The clean result above is the profile's doing: the development profile warns."""
    result = manage("check", "--deploy", "--fail-level", "WARNING", SECRET_KEY=STRONG)
    assert result.returncode != 0
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in result.stderr, warning


def test_host_and_origin_lists_from_the_environment_drop_spaces_and_empty_items():
    """``CSRF_TRUSTED_ORIGINS`` also decides which pages may open the socket: an origin
    written after a comma and a space must still match a browser's exactly."""
    shown = manage(
        "shell",
        "-c",
        "from django.conf import settings as s; print(s.ALLOWED_HOSTS, s.CSRF_TRUSTED_ORIGINS)",
        SECRET_KEY=STRONG,
        ALLOWED_HOSTS=" chat.example.com, ,127.0.0.1",
        CSRF_TRUSTED_ORIGINS="https://chat.example.com, https://*.example.org,",
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[-1] == (
        "['chat.example.com', '127.0.0.1'] ['https://chat.example.com', 'https://*.example.org']"
    )
