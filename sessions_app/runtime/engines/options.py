"""Engine option schemas: what a box's ``engine_options`` may hold for its engine.

Each engine class declares ``OPTIONS`` (key -> ``Option``) next to the code that reads them,
so adding an engine or an option adds its validation. The admin form checks a box's options
with ``validate`` before they are saved; the engine itself still reads them defensively.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

# Key of an error about the options as a whole (not a JSON object).
WHOLE = ""

Check = Callable[[Any], str | None]


@dataclass(frozen=True)
class Option:
    """One key: the JSON type it takes, whether the engine needs it, and an extra check
    returning an error message (or None)."""

    kind: str  # "string", "number", "integer", "boolean", "object", "string or object"
    required: bool = False
    check: Check | None = None


Schema = Mapping[str, Option]

_KINDS: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    # JSON has no int/float distinction, but true and false are not numbers.
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "string or object": lambda v: isinstance(v, str | dict),
}


def validate(schema: Schema, options: Any) -> dict[str, str]:
    """Errors by option key (``WHOLE`` for the value as a whole); empty when valid."""
    if not isinstance(options, dict):
        return {WHOLE: "must be a JSON object"}
    errors: dict[str, str] = {}
    for key in options:
        if key not in schema:
            errors[key] = f"unknown option (known: {', '.join(sorted(schema)) or 'none'})"
    for key, option in schema.items():
        if key not in options:
            if option.required:
                errors[key] = "required"
            continue
        value = options[key]
        if not _KINDS[option.kind](value):
            errors[key] = f"must be a {option.kind}"
        elif option.check is not None and (message := option.check(value)):
            errors[key] = message
    return errors


# --- checks the engines share ----------------------------------------------------------------


def at_least(minimum: float) -> Check:
    return lambda v: None if v >= minimum else f"must be at least {minimum}"


def positive(value: float) -> str | None:
    return None if value > 0 else "must be greater than 0"


def not_blank(value: str) -> str | None:
    return None if value.strip() else "must not be empty"


def http_url(value: str) -> str | None:
    """An http(s) URL with a host. Looser than Django's ``URLValidator``, which refuses
    hosts without a dot (``http://vllm:8000/v1``, a container's name)."""
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 -- raises ValueError on a bad port
    except ValueError:
        return "must be an http(s) URL"
    if parts.scheme not in ("http", "https") or not parts.hostname or " " in value:
        return "must be an http(s) URL"
    return None


def one_of(*choices: str) -> Check:
    return lambda v: None if v in choices else f"must be one of {', '.join(choices)}"
