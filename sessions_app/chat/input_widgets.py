"""The inputs of a chat's settings panel: ``chat.Select``, ``chat.Switch``, ``chat.Slider``,
``chat.TextInput``, ``chat.NumberInput``, ``chat.Tags`` (and ``chat.Checkbox``,
``chat.MultiSelect``), with
Chainlit's names and wire dicts (``to_dict``).

Everything after ``id`` and ``label`` is keyword-only: Chainlit's positional order puts
``tooltip`` third, so ``Slider("t", "T", 0.5, 0, 1)`` would silently mean something else.
An input checks its own initial value when it is made, with the rules a change from the
client is checked by (``sessions_app.chat_settings``), so a declaration the panel could never
submit fails in the app, at once.
"""

import math
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, ClassVar

from sessions_app.chat_settings import check_value


@dataclass
class InputWidget:
    id: str
    label: str
    _: KW_ONLY
    tooltip: str | None = None
    description: str | None = None
    disabled: bool = False

    type: ClassVar[str] = ""

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id or not isinstance(self.label, str) or not self.label:
            raise ValueError(f"{type(self).__name__} needs a non-empty id and label")

    def _initial(self) -> Any:
        return getattr(self, "initial", None)

    def _fields(self) -> dict[str, Any]:
        """What this kind of input adds to the wire dict."""
        return {}

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "id": self.id,
            "label": self.label,
            "initial": self._initial(),
            "tooltip": self.tooltip,
            "description": self.description,
            "disabled": self.disabled,
            **self._fields(),
        }

    def _check_initial(self) -> None:
        if self._initial() is not None:
            check_value(self.to_dict(), self._initial())

    def _check_finite(self, **bounds: float | None) -> None:
        """Bounds and steps are finite numbers: NaN and infinity are not JSON the panel can
        read, and no value could be checked against them."""
        for name, bound in bounds.items():
            if bound is None or (isinstance(bound, int) and not isinstance(bound, bool)):
                continue
            if not isinstance(bound, float) or not math.isfinite(bound):
                raise ValueError(f"{type(self).__name__} {self.id!r}: {name} must be a finite number")


@dataclass(kw_only=True)
class Switch(InputWidget):
    """On or off (a checkbox drawn as a switch)."""

    initial: bool = False
    type: ClassVar[str] = "switch"

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_initial()


@dataclass(kw_only=True)
class Checkbox(Switch):
    """On or off, drawn as a checkbox."""

    type: ClassVar[str] = "checkbox"


@dataclass(kw_only=True)
class Slider(InputWidget):
    """A number from ``min`` to ``max`` in steps of ``step`` (counted from ``min``)."""

    initial: float = 0
    min: float = 0
    max: float = 10
    step: float = 1
    type: ClassVar[str] = "slider"

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_finite(min=self.min, max=self.max, step=self.step)
        if not self.min <= self.max or self.step <= 0:
            raise ValueError(f"Slider {self.id!r} needs min <= max and a positive step")
        self._check_initial()

    def _fields(self) -> dict[str, Any]:
        return {"min": self.min, "max": self.max, "step": self.step}


@dataclass(kw_only=True)
class Select(InputWidget):
    """One of a list: ``values`` (each its own label) or ``items`` ({label: value}). The
    initial choice is ``initial_value``, or ``initial_index`` into ``values``."""

    values: list[str] = field(default_factory=list)
    items: dict[str, str] = field(default_factory=dict)
    initial_value: str | None = None
    initial_index: int | None = None
    type: ClassVar[str] = "select"

    def __post_init__(self) -> None:
        super().__post_init__()
        if bool(self.values) == bool(self.items):
            raise ValueError(f"Select {self.id!r} needs either values or items (one of them)")
        if self.initial_index is not None:
            if not self.values:
                raise ValueError(f"Select {self.id!r}: initial_index goes with values, not items")
            self.initial_value = self.values[self.initial_index]
        if self.values:
            self.items = {value: value for value in self.values}
        self._check_initial()

    def _initial(self) -> Any:
        return self.initial_value

    def _fields(self) -> dict[str, Any]:
        return {"items": [{"label": label, "value": value} for label, value in self.items.items()]}


@dataclass(kw_only=True)
class TextInput(InputWidget):
    """Free text of at most ``max_length`` characters, on one line or several."""

    initial: str | None = None
    placeholder: str | None = None
    multiline: bool = False
    max_length: int | None = None
    type: ClassVar[str] = "textinput"

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_initial()

    def _fields(self) -> dict[str, Any]:
        return {"placeholder": self.placeholder, "multiline": self.multiline, "max_length": self.max_length}


@dataclass(kw_only=True)
class NumberInput(InputWidget):
    """A number, within ``min`` / ``max`` and on ``step`` when they are given (Tether's
    additions: Chainlit's takes any number)."""

    initial: float | None = None
    placeholder: str | None = None
    min: float | None = None
    max: float | None = None
    step: float | None = None
    type: ClassVar[str] = "numberinput"

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_finite(min=self.min, max=self.max, step=self.step)
        if self.step is not None and self.step <= 0:
            raise ValueError(f"NumberInput {self.id!r} needs a positive step")
        self._check_initial()

    def _fields(self) -> dict[str, Any]:
        return {"placeholder": self.placeholder, "min": self.min, "max": self.max, "step": self.step}


@dataclass(kw_only=True)
class Tags(InputWidget):
    """A list of short strings; ``values`` are suggestions the editor offers, not a limit."""

    initial: list[str] = field(default_factory=list)
    values: list[str] = field(default_factory=list)
    max_tags: int | None = None
    type: ClassVar[str] = "tags"

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_initial()

    def _fields(self) -> dict[str, Any]:
        return {"values": list(self.values), "max_tags": self.max_tags}


@dataclass(kw_only=True)
class MultiSelect(InputWidget):
    """Any number of a list: ``values`` (each its own label) or ``items`` ({label: value})."""

    initial: list[str] = field(default_factory=list)
    values: list[str] = field(default_factory=list)
    items: dict[str, str] = field(default_factory=dict)
    type: ClassVar[str] = "multiselect"

    def __post_init__(self) -> None:
        super().__post_init__()
        if bool(self.values) == bool(self.items):
            raise ValueError(f"MultiSelect {self.id!r} needs either values or items (one of them)")
        if self.values:
            self.items = {value: value for value in self.values}
        self._check_initial()

    def _fields(self) -> dict[str, Any]:
        return {"items": [{"label": label, "value": value} for label, value in self.items.items()]}
