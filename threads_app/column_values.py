"""The parameters of an INSERT written once as SQL (``send_inserts``, ``step_appends``), adapted
by the model's own fields, without the fields' call chain where it returns the value as given.

``Field.get_db_prep_save`` runs through four or five calls per value (``get_db_prep_value``,
``get_prep_value``, ``to_python``, a foreign key's target field) and the connection proxy; for
the two dozen columns of a step and the dozen of a send, that was about a tenth of the CPU of
a turn's database calls (issue 22, profiled on the database threads). For a plain column (a
``CharField``, ``TextField`` or ``BooleanField`` of exactly that class, or a native UUID on
PostgreSQL, directly or as a foreign key's target) a value of exactly the type the
field would return, or None, is what the field answers, so it is passed as it is; any other
value and any other field (integers, which Django wraps for psycopg as ``Int8`` and the like;
dates, JSON, choices' enum members, subclasses) still go through the field.
"""

import uuid
from collections.abc import Iterator, Sequence
from typing import Any

from django.db import models
from django.db.backends.base.base import BaseDatabaseWrapper

# Exactly these field classes give back a value of this type (and None) unchanged.
_PLAIN: dict[type[models.Field[Any, Any]], type] = {
    models.CharField: str,
    models.TextField: str,
    models.BooleanField: bool,
}


def _plain_type(field: models.Field[Any, Any], native_uuid: bool) -> type | None:
    """The type whose values ``field`` saves unchanged (None is saved unchanged too), or None."""
    if isinstance(field, models.ForeignKey):
        target = field.target_field
        return _plain_type(target, native_uuid) if isinstance(target, models.Field) else None
    if type(field) is models.UUIDField:
        return uuid.UUID if native_uuid else None
    return _PLAIN.get(type(field))


class Columns:
    """The columns of one INSERT, in order; ``db_values`` adapts a row's values for them."""

    def __init__(self, fields: Sequence[models.Field[Any, Any]]) -> None:
        self.fields = tuple(fields)
        self._plain: dict[bool, tuple[type | None, ...]] = {}

    def __iter__(self) -> Iterator[models.Field[Any, Any]]:
        return iter(self.fields)

    def __len__(self) -> int:
        return len(self.fields)

    def db_values(self, values: Sequence[Any], connection: BaseDatabaseWrapper) -> list[Any]:
        """``[field.get_db_prep_save(value, connection) for field, value in zip(fields, values)]``."""
        native_uuid = bool(connection.features.has_native_uuid_field)
        plain = self._plain.get(native_uuid)
        if plain is None:
            plain = self._plain[native_uuid] = tuple(_plain_type(f, native_uuid) for f in self.fields)
        return [
            value
            if kind is not None and (value is None or type(value) is kind)
            else field.get_db_prep_save(value, connection)
            for field, kind, value in zip(self.fields, plain, values, strict=True)
        ]
