"""Chainlit's frontend build for the tests: ``CHAINLIT_FRONTEND_DIR`` when the environment
names one, else the pinned release installed once by ``manage.py install_chainlit_frontend``
(pip downloads the wheel) into ``var/test-chainlit-frontend`` and reused by later runs. A
test that needs it is skipped, with the reason, only outside CI and only when the build can
neither be found nor installed."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from chainlit_frontend.installing import CHAINLIT_VERSION, SOURCE_FILE

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(settings.VAR_DIR) / "test-chainlit-frontend"


def _installed(where: Path) -> bool:
    return (where / "frontend" / "index.html").is_file() and (where / "copilot" / "index.js").is_file()


def _current(where: Path) -> bool:
    """The cache holds the pinned release (a new pin installs again)."""
    try:
        record = json.loads((where / SOURCE_FILE).read_text())
    except (OSError, ValueError):
        return False
    return _installed(where) and record.get("chainlit_version") == CHAINLIT_VERSION


def chainlit_build_dir() -> Path:
    """The build's directory, installing it if needed; skips (fails under CI) without it."""
    named = os.environ.get("CHAINLIT_FRONTEND_DIR")
    if named:
        if not _installed(Path(named)):
            pytest.fail(f"CHAINLIT_FRONTEND_DIR={named} holds no Chainlit build")
        return Path(named)
    if _current(CACHE):
        return CACHE
    done = subprocess.run(
        [sys.executable, "manage.py", "install_chainlit_frontend", "--dest", str(CACHE)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0 or not _installed(CACHE):
        reason = f"Chainlit's frontend build is absent and could not be installed: {done.stderr[-1500:]}"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return CACHE
