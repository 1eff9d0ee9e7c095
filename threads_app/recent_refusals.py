"""Credentials a budget refused a moment ago, by route: what lets the ASGI layer
(``chatproject.budget_gate``) answer their repeats 429 without Django.

A refused request costs what any request costs to get to its throttle: Django's handler and
middleware, a session or token lookup in the database, DRF's machinery, on a request thread
that holds the GIL while the event loop (every socket of the process) waits. A flood past a
budget is almost all repeats, so when ``BudgetThrottle`` refuses a request it remembers the
request's route and credential (the API token, else the session cookie; hashed) until the
budget's wait is over, and the gate refuses the repeats from that alone. This never lets
anything through: a remembered credential is only ever refused, for at most the wait its own
refusal named, and a token revoked meanwhile is answered 429 instead of 401 for that long.
"""

import hashlib
import threading
import time
from collections.abc import Iterable

from django.conf import settings
from django.http.cookie import parse_cookie

TOKEN_PREFIX = b"token "  # rest_framework's TokenAuthentication keyword, lower-cased


def credential(authorization: bytes | None, cookie: bytes | None) -> bytes | None:
    """The credential DRF authenticates a request with (``DEFAULT_AUTHENTICATION_CLASSES``:
    the token first, then the session), hashed; None when it has neither."""
    if authorization and authorization[: len(TOKEN_PREFIX)].lower() == TOKEN_PREFIX:
        return hashlib.blake2b(b"t" + authorization, digest_size=16).digest()
    if cookie:
        session_key = parse_cookie(cookie.decode("latin-1")).get(settings.SESSION_COOKIE_NAME)
        if session_key:
            return hashlib.blake2b(b"s" + session_key.encode(), digest_size=16).digest()
    return None


def headers_credential(headers: Iterable[tuple[bytes, bytes]]) -> bytes | None:
    """``credential`` from an ASGI scope's headers."""
    authorization = cookie = None
    for name, value in headers:
        if name == b"authorization":
            authorization = value
        elif name == b"cookie":
            cookie = value
    return credential(authorization, cookie)


class RecentRefusals:
    """(method, path, credential) -> until when its budget refuses it. Bounded: past
    ``MAX_ENTRIES`` the expired ones are dropped, and a refusal finding no room is not kept."""

    MAX_ENTRIES = 10_000

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._until: dict[tuple[str, str, bytes], float] = {}

    def remember(self, method: str, path: str, who: bytes, wait: float) -> None:
        now = time.monotonic()
        with self._lock:
            if len(self._until) >= self.MAX_ENTRIES:
                self._until = {k: until for k, until in self._until.items() if until > now}
            if len(self._until) < self.MAX_ENTRIES:
                self._until[(method, path, who)] = now + wait

    def wait(self, method: str, path: str, who: bytes) -> float | None:
        """Seconds this request's budget still refuses it for, or None."""
        with self._lock:
            until = self._until.get((method, path, who))
        if until is None:
            return None
        left = until - time.monotonic()
        return left if left > 0 else None

    def clear(self) -> None:
        with self._lock:
            self._until.clear()


recent_refusals = RecentRefusals()
