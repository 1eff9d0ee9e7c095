"""The thread search's document as a stored column: ``threads_app_step.search_document``, a
tsvector PostgreSQL computes when a message step is written (NULL for other steps), with a
GIN index over it under the name the expression index of 0005 had (``step_message_search``).

Why a column rather than 0005's partial expression index: the planner uses no statistics of a
partial index, so it guessed every search word equally rare; and any plan that checked a
step without the index (each step of a thread, or a recheck) computed ``to_tsvector`` of its
text again, about 40 us per message: 4.3 s of CPU for a search over 105 MB of messages. The
column has statistics of its own (ANALYZE) and is read, not recomputed.

PostgreSQL only (SQLite searches by scanning); the column is not a model field, so the
migration state does not list it (``selectors.SearchDocument`` reads it). Adding it rewrites
the steps table once, under a lock, like any stored generated column.
"""

from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps

# The expression and condition 0005 indexed; ``selectors`` searches the column by name.
ADD = (
    """ALTER TABLE threads_app_step ADD COLUMN search_document tsvector GENERATED ALWAYS AS (
    CASE WHEN type IN ('user_message', 'assistant_message')
         THEN to_tsvector('english'::regconfig, COALESCE(output, ''::text)) END
) STORED""",
    "DROP INDEX IF EXISTS step_message_search",
    "CREATE INDEX step_message_search ON threads_app_step USING gin (search_document)",
)
REMOVE = (
    "DROP INDEX IF EXISTS step_message_search",
    "ALTER TABLE threads_app_step DROP COLUMN IF EXISTS search_document",
    """CREATE INDEX step_message_search ON threads_app_step
    USING gin (to_tsvector('english'::regconfig, COALESCE(output, ''::text)))
    WHERE type::text = ANY (ARRAY['user_message', 'assistant_message'])""",
)


def add_column(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        for statement in ADD:
            schema_editor.execute(statement)


def remove_column(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        for statement in REMOVE:
            schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("threads_app", "0007_ask")]

    operations = [migrations.RunPython(add_column, remove_column)]
