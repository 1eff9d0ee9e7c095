"""The per-install ``SECRET_KEY``: generated once into a private file outside the repository,
and refused when it is one anybody could know.

Django signs sessions, password-reset links and CSRF tokens with it, so a key printed in a
public repository lets anyone forge a session. ``settings.py`` reads ``SECRET_KEY`` from the
environment, else from ``SECRET_KEY_FILE`` (``var/secret_key``); outside the production
profile a missing file is created with a fresh random key, readable by its owner only.
"""

import contextlib
import os
import secrets
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

# Keys that were once public (the repository's old default); never accepted without DEBUG.
KNOWN_KEYS = frozenset({"tether-dev-secret-key-change-me-in-production"})
# Django's own bar for a strong key (the ``security.W009`` deploy check).
MIN_LENGTH = 50
MIN_UNIQUE_CHARACTERS = 5


def generate() -> str:
    return secrets.token_urlsafe(64)


def load(path: Path, *, create: bool) -> str:
    """The key stored at ``path``; with ``create``, a new one is written there first if none is.

    The file is written under a temporary name with mode 0600 and linked into place, so two
    processes starting at once agree on one key and nobody reads a half-written file.
    """
    if not path.exists() and create:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(descriptor, "w") as file:
                file.write(generate() + "\n")
            with contextlib.suppress(FileExistsError):  # another process won: its key is the key
                os.link(temporary, path)
        finally:
            temporary.unlink(missing_ok=True)
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        return ""


def weakness(key: str) -> str | None:
    """Why ``key`` may not sign anything in a server without DEBUG, or None if it may."""
    if not key:
        return "SECRET_KEY is empty"
    if key in KNOWN_KEYS:
        return "SECRET_KEY is the public example key from the repository"
    if key.startswith("django-insecure-"):
        return "SECRET_KEY is one of Django's 'django-insecure-' development keys"
    if len(key) < MIN_LENGTH or len(set(key)) < MIN_UNIQUE_CHARACTERS:
        return f"SECRET_KEY is shorter than {MIN_LENGTH} characters or too repetitive"
    return None


def refuse_weak(key: str, source: str) -> None:
    """Stop the process (settings import) when ``key`` is weak; ``source`` says where it came from."""
    problem = weakness(key)
    if problem:
        raise ImproperlyConfigured(
            f"{problem} (from {source}) and DEBUG is off: refusing to start. Set the SECRET_KEY "
            "environment variable to a long random value, or point SECRET_KEY_FILE at a file holding one "
            '(python -c "import secrets; print(secrets.token_urlsafe(64))")'
        )
