"""JSON on the socket: orjson writes it, with the standard library for what orjson refuses,
so that every frame is what the stock clients decoded before (python-socketio,
socket.io-client, the web page).

orjson writes UTF-8 (the standard encoder escaped non-ASCII as ``\\uXXXX``: the same strings
once decoded), 5 to 10 times faster. It refuses a few values the standard encoder writes:
integers past 64 bits, keys that are not strings, strings holding a lone surrogate; those go
through the standard encoder as before. (NaN and infinities, which the standard encoder wrote
as ``NaN``, a token JavaScript's ``JSON.parse`` rejects, become ``null``.)

Reading stays with python-socketio's reader (``engineio.json``: the standard library, with
integers of more than 100 digits refused). orjson is no faster on what clients send (small
frames, or one long string: 1.7 ms for 700 KB against the standard library's 0.7 ms, measured
here), and it reads ``NaN`` and integers past 64 bits otherwise (a refusal, a float).
"""

import json
from typing import Any

import orjson
from engineio import json as engineio_json

_FALLBACK_ENCODER = json.JSONEncoder(separators=(",", ":"))


def dumps(value: Any) -> str:
    """``value`` as compact JSON text."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # orjson.JSONEncodeError: what orjson does not write, the stdlib does
        return _FALLBACK_ENCODER.encode(value)


def loads(text: str) -> Any:
    """The value of a JSON text (``ValueError`` when it is not one), as python-socketio reads it."""
    return engineio_json.loads(text)
