"""Declared chat settings: what a change from the client may hold, checked against the inputs
the app declared with ``chat.ChatSettings(...).send()``.

The check works on the inputs as they go on the wire (``Select.to_dict()`` ...), which is also
how they are kept in the thread's metadata: a session restored in another process, or a thread
resumed days later, validates against the same declaration without the app sending it again.
A change is all or nothing: the first bad value refuses the whole change, naming its input.
"""

import contextlib
import math
from collections.abc import Callable, Mapping
from typing import Any

from sessions_app import inputs as wire_inputs

# Bounds for values whose input declares none.
TEXT_MAX_CHARS = 4000
TAGS_MAX_COUNT = 50
TAG_MAX_CHARS = 200
# How far from a step a slider's value may be and still be on it (floats: 0.1 + 0.2).
STEP_TOLERANCE = 1e-9


class InvalidSetting(ValueError):
    """A value refused for the input ``setting`` (None: the change as a whole)."""

    def __init__(self, message: str, setting: str | None = None) -> None:
        super().__init__(message)
        self.setting = setting


def _number(value: Any) -> float:
    """``value`` as a float, if it is a finite number a float can hold (JSON allows integers
    of thousands of digits; ``float()`` of one overflows)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidSetting("must be a number")
    try:
        number = float(value)
    except OverflowError:
        raise InvalidSetting("is too large") from None
    if not math.isfinite(number):
        raise InvalidSetting("must be a number")
    return number


def _in_range(value: float, spec: Mapping[str, Any]) -> None:
    low, high, step = spec.get("min"), spec.get("max"), spec.get("step")
    if low is not None and value < low:
        raise InvalidSetting(f"must be at least {low}")
    if high is not None and value > high:
        raise InvalidSetting(f"must be at most {high}")
    if step:
        # Finite bounds, value and step can still make an infinite count of steps (1e308 on
        # a step of 0.5: 2e308), which round() cannot take.
        try:
            steps = (value - (low or 0)) / step
        except OverflowError:  # a declared bound too large for a float
            steps = math.inf
        if not math.isfinite(steps):
            raise InvalidSetting(f"is too large for a step of {step}")
        if abs(steps - round(steps)) > STEP_TOLERANCE * max(1.0, abs(steps)):
            raise InvalidSetting(f"must be a multiple of {step} from {low or 0}")


def _check_select(value: Any, spec: Mapping[str, Any]) -> Any:
    allowed = [item["value"] for item in spec.get("items") or []]
    if not isinstance(value, str) or value not in allowed:
        raise InvalidSetting(f"must be one of {allowed}")
    return value


def _check_switch(value: Any, spec: Mapping[str, Any]) -> bool:
    if not isinstance(value, bool):
        raise InvalidSetting("must be true or false")
    return value


def _check_slider(value: Any, spec: Mapping[str, Any]) -> int | float:
    _in_range(_number(value), spec)
    return value  # type: ignore[no-any-return]  # _number checked it is an int or a float


def _check_text(value: Any, spec: Mapping[str, Any]) -> str:
    limit = spec.get("max_length") or TEXT_MAX_CHARS
    try:
        return wire_inputs.clean_text(value, "the value", max_chars=limit)
    except wire_inputs.InvalidInput as bad:
        raise InvalidSetting(str(bad).removeprefix("the value ")) from None


def _check_tags(value: Any, spec: Mapping[str, Any]) -> list[str]:
    limit = spec.get("max_tags") or TAGS_MAX_COUNT
    if not isinstance(value, list) or not all(isinstance(tag, str) for tag in value):
        raise InvalidSetting("must be a list of strings")
    if len(value) > limit:
        raise InvalidSetting(f"holds {len(value)} tags; the limit is {limit}")
    for tag in value:
        if not tag.strip():
            raise InvalidSetting("must not hold empty tags")
        _check_text(tag, {"max_length": TAG_MAX_CHARS})
    if len(set(value)) != len(value):
        raise InvalidSetting("must not hold the same tag twice")
    return list(value)


def _check_multiselect(value: Any, spec: Mapping[str, Any]) -> list[str]:
    allowed = [item["value"] for item in spec.get("items") or []]
    if not isinstance(value, list) or not all(isinstance(choice, str) for choice in value):
        raise InvalidSetting("must be a list of strings")
    unknown = [choice for choice in value if choice not in allowed]
    if unknown:
        raise InvalidSetting(f"may only hold {allowed}, not {unknown}")
    if len(set(value)) != len(value):
        raise InvalidSetting("must not hold the same choice twice")
    return list(value)


# By the input's wire ``type`` (Chainlit's names). A checkbox is a switch drawn differently.
CHECKS: dict[str, Callable[[Any, Mapping[str, Any]], Any]] = {
    "select": _check_select,
    "switch": _check_switch,
    "checkbox": _check_switch,
    "slider": _check_slider,
    "numberinput": _check_slider,
    "textinput": _check_text,
    "tags": _check_tags,
    "multiselect": _check_multiselect,
}


def check_value(spec: Mapping[str, Any], value: Any) -> Any:
    """``value`` for the input ``spec`` (a wire dict), or ``InvalidSetting`` naming it."""
    try:
        return CHECKS[spec["type"]](value, spec)
    except InvalidSetting as bad:
        raise InvalidSetting(f"{spec['label']} ({spec['id']}) {bad}", spec["id"]) from None


def validate_change(
    declared: list[dict[str, Any]], current: Mapping[str, Any], change: Any
) -> dict[str, Any]:
    """The values after ``change`` (``{id: value}``, some or all of the declared inputs), or
    ``InvalidSetting`` and nothing changed: unknown ids, wrong types, values outside what the
    input offers, and changes to a disabled input are refused. A value equal to the current
    one is taken as it is (a declaration's values were checked when it was made, so it can
    only be an initial ``None``: a select or number the user has not set)."""
    if not isinstance(change, dict):
        raise InvalidSetting("chat settings must be a JSON object of {input id: value}")
    by_id = {spec["id"]: spec for spec in declared}
    unknown = sorted(str(key) for key in change if key not in by_id)
    if unknown:
        raise InvalidSetting(f"unknown chat settings: {', '.join(unknown)}", unknown[0])
    values = dict(current)
    for key, value in change.items():
        spec = by_id[key]
        if key in current and type(value) is type(current[key]) and value == current[key]:
            continue  # unchanged (a client sends the whole form): a select with no choice yet
        checked = check_value(spec, value)
        if spec.get("disabled") and checked != current.get(key):
            raise InvalidSetting(f"{spec['label']} ({key}) cannot be changed", key)
        values[key] = checked
    return values


def values_for(declared: list[dict[str, Any]], current: Mapping[str, Any]) -> dict[str, Any]:
    """The values a (re)declaration starts from: the session's own where it has a valid one
    (a resumed thread keeps what its user chose), else the input's initial value."""
    values: dict[str, Any] = {}
    for spec in declared:
        values[spec["id"]] = spec.get("initial")
        if spec["id"] in current:
            with contextlib.suppress(InvalidSetting):  # no longer valid: the initial value
                values[spec["id"]] = check_value(spec, current[spec["id"]])
    return values


def wire_payload(declared: list[dict[str, Any]], values: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The ``chat_settings`` event: the declared inputs with ``initial`` set to the current
    values, so that a client (Chainlit's included) draws the panel as the user left it."""
    return [{**spec, "initial": values.get(spec["id"], spec.get("initial"))} for spec in declared]


def declared_inputs(saved: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The declared inputs kept in a saved user session (thread metadata), [] when there are
    none or they are not what ``ChatSettings`` writes (metadata an operator edited)."""
    value = saved.get("chat_settings_inputs")
    if isinstance(value, list) and all(
        isinstance(spec, dict)
        and spec.get("type") in CHECKS
        and isinstance(spec.get("id"), str)
        and isinstance(spec.get("label"), str)
        for spec in value
    ):
        return value
    return []
