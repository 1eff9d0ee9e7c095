"""The INSERT parameters adapted by ``column_values.Columns``: the same values the model's
fields give, for every column of a step and of a send, whatever the value's type."""

import datetime
import uuid
from typing import Any

import pytest
from django.db import connection

from threads_app import send_inserts, step_appends
from threads_app.column_values import Columns
from threads_app.models import AcceptedMessage

# The columns the two INSERTs write (module state of theirs, read here on purpose).
STEP_COLUMNS: Columns = step_appends._INSERTED_COLUMNS  # noqa: SLF001
SEND_COLUMNS: Columns = send_inserts._COLUMNS  # noqa: SLF001


def _samples() -> list[Any]:
    """Values of many types, including ones a field converts (str ids, choices, dates)."""
    return [
        None,
        "",
        "text",
        AcceptedMessage.State.PENDING,  # a str subclass: goes through the field
        0,
        7,
        True,
        False,
        uuid.UUID("12345678-1234-5678-1234-567812345678"),
        "12345678-1234-5678-1234-567812345678",
        datetime.datetime(2026, 12, 4, 12, 0, tzinfo=datetime.UTC),
        {"a": [1, 2]},
        [],
        1.5,
    ]


def _comparable(value: Any) -> Any:
    """A psycopg ``Jsonb`` wrapper compares by what it wraps."""
    wrapped = getattr(value, "obj", None)
    return ("wrapped", type(value).__name__, wrapped) if wrapped is not None else (type(value), value)


def _field_answer(field: Any, value: Any) -> Any:
    try:
        return _comparable(field.get_db_prep_save(value, connection))
    except (TypeError, ValueError, Exception) as exc:
        return ("refused", type(exc))


def _columns_answer(columns: Columns, index: int, value: Any) -> Any:
    values = [None] * len(columns)
    values[index] = value
    try:
        return _comparable(columns.db_values(values, connection)[index])
    except (TypeError, ValueError, Exception) as exc:
        return ("refused", type(exc))


@pytest.mark.django_db
@pytest.mark.parametrize("columns", [STEP_COLUMNS, SEND_COLUMNS], ids=["step", "send"])
def test_columns_adapt_every_value_as_its_field_does(columns: Columns) -> None:
    mismatches = []
    for index, field in enumerate(columns):
        for value in _samples():
            expected = _field_answer(field, value)
            got = _columns_answer(columns, index, value)
            if got != expected:
                mismatches.append(f"{field.name} {value!r}: field {expected!r}, Columns {got!r}")
    assert not mismatches, "\n".join(mismatches)


@pytest.mark.django_db
def test_plain_values_skip_the_field(monkeypatch: pytest.MonkeyPatch) -> None:
    """A str for a text column is passed as it is: no call into the field."""
    field = next(f for f in SEND_COLUMNS if f.name == "text")
    index = SEND_COLUMNS.fields.index(field)
    values: list[Any] = [None] * len(SEND_COLUMNS)
    values[index] = text = "hello"
    calls: list[Any] = []
    original = type(field).get_db_prep_save

    def counted(self: Any, value: Any, conn: Any) -> Any:
        calls.append(value)
        return original(self, value, conn)

    monkeypatch.setattr(type(field), "get_db_prep_save", counted)
    assert SEND_COLUMNS.db_values(values, connection)[index] is text
    assert text not in calls, calls
