"""What the socket accepts: the same rules the REST API applies, checked before anything is
recorded or applied, so bad input gets a clear ``error`` and never a traceback, and a bad value
never reaches the session (where it would break every later save).

PostgreSQL stores neither NUL characters (in text or jsonb) nor lone surrogates (not UTF-8);
both are refused here rather than failing deep inside a write.
"""

import json
from collections.abc import Iterator
from typing import Any

from django.conf import settings

from threads_app import json_shape, parsers

# A JSON text may spell each byte of what it holds as a six-character escape, no more.
ESCAPED_BYTES = 6


class InvalidInput(ValueError):
    """The value is refused; the message says why, for the client."""


def _storable(text: str, what: str) -> None:
    if "\x00" in text:
        raise InvalidInput(f"{what} must not contain NUL characters")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"{what} must be valid Unicode (no lone surrogates)") from None


def clean_text(value: Any, what: str, *, max_chars: int | None = None) -> str:
    """A string that can be stored, at most ``max_chars`` long (``MAX_MESSAGE_CHARS``)."""
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be a string")
    limit = settings.MAX_MESSAGE_CHARS if max_chars is None else max_chars
    if len(value) > limit:
        raise InvalidInput(f"{what} is longer than {limit} characters")
    _storable(value, what)
    return value


def clean_object(value: Any, what: str, *, max_bytes: int) -> dict[str, Any]:
    """A JSON object that can be stored: finite numbers, storable strings, at most
    ``max_bytes`` as JSON. Its strings are checked first, and their lengths bound its size
    from below: a value far over the budget (900 KB in one string) is refused without being
    encoded, which took 4 ms of the event loop per such frame."""
    if not isinstance(value, dict):
        raise InvalidInput(f"{what} must be a JSON object")
    plain = f"{what} must be plain JSON (finite numbers, no deep nesting)"
    least = 0
    try:
        for text in _strings(value):
            _storable(text, what)
            least += len(text) + 2  # its quotes; UTF-8 and escapes only add to it
            if least > max_bytes:
                raise InvalidInput(f"{what} is at least {least} bytes as JSON; the limit is {max_bytes}")
    except RecursionError:
        raise InvalidInput(plain) from None
    try:
        encoded = json.dumps(value, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        raise InvalidInput(plain) from None
    _storable(encoded, what)  # lone surrogates (json.dumps escapes NUL, so look inside too)
    size = len(encoded.encode("utf-8"))
    if size > max_bytes:
        raise InvalidInput(f"{what} is {size} bytes as JSON; the limit is {max_bytes}")
    return value


def parse_object(text: Any, what: str, *, max_bytes: int) -> dict[str, Any]:
    """A JSON object sent as text (``userEnv``), parsed only once it could fit ``max_bytes``
    and its shape is within the JSON budgets: 1 MB of ``[],`` in a CONNECT frame's auth is
    a string there, which the frame's own measure does not look into."""
    if not isinstance(text, str):
        raise InvalidInput(f"{what} must be a JSON object")
    if len(text) > ESCAPED_BYTES * max_bytes:
        raise InvalidInput(f"{what} is {len(text)} characters of JSON; the limit is {max_bytes} bytes")
    try:
        json_shape.measure(
            text.encode("utf-8", "surrogatepass"), parsers.max_depth(), parsers.max_containers()
        )
        value = json.loads(text)
    except json_shape.ShapeError as exc:
        raise InvalidInput(f"{what}: {exc}") from None
    except (ValueError, RecursionError):
        raise InvalidInput(f"{what} must be a JSON object") from None
    if not isinstance(value, dict):
        raise InvalidInput(f"{what} must be a JSON object")
    return value


def _strings(value: Any) -> Iterator[str]:
    """Every key and string inside a JSON value (already known to be shallow enough)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
