"""What a polling sid says, and who may use it.

The sid is the owner's channel-layer channel, signed with the install's secret key: any
process can tell where to forward a request without a lookup, and nobody can make a sid that
sends the owner's messages elsewhere.

A request that shows credentials (a session cookie, an ``Authorization`` header) is the
session's only with the ones the session was opened with (compared as a keyed hash); any
other is answered as for an unknown sid, so another user's browser, which always sends its
own cookie, reads nothing with a sid. A request that shows none is served on the sid alone,
which is Engine.IO's contract (the sid is an unguessable bearer secret): python-socketio's
client sends its ``headers`` (the cookie) with the handshake only, and an integration that
signs in with a ``token`` in the Socket.IO auth payload has no HTTP credentials at all.
"""

from typing import Any

from django.conf import settings
from django.core import signing
from django.http.cookie import parse_cookie
from django.utils.crypto import constant_time_compare, salted_hmac

SALT = "tether.polling.sid"


def sid_for(channel: str) -> str:
    return signing.dumps(channel, salt=SALT)


def owner_channel(sid: str) -> str | None:
    """The channel of the process running the session ``sid`` (None: not a sid of ours)."""
    try:
        channel = signing.loads(sid, salt=SALT)
    except signing.BadSignature:
        return None
    return channel if isinstance(channel, str) else None


def credential_of(scope: Any) -> str:
    """A keyed hash of the request's credentials (session cookie, Authorization header); ""
    for a request without any."""
    cookie = b""
    authorization = b""
    for name, value in scope.get("headers", []):
        if name == b"cookie":
            cookie = value
        elif name == b"authorization":
            authorization = value
    session_key = parse_cookie(cookie.decode("latin-1")).get(settings.SESSION_COOKIE_NAME, "")
    if not session_key and not authorization:
        return ""
    return salted_hmac(SALT, f"{session_key}\n{authorization.decode('latin-1')}").hexdigest()


def may_use(credential: str, session_credential: str) -> bool:
    """Whether a request with ``credential`` may use a session opened with the other."""
    return credential == "" or constant_time_compare(credential, session_credential)
