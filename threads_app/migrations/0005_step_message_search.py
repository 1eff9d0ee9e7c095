"""A GIN index for the thread search over message texts (``selectors.search_threads``).

PostgreSQL only: a partial expression index over the user and assistant messages' full-text
documents. SQLite searches by scanning and gets nothing. The index is not in the model's
``Meta`` (SQLite cannot build it), so the migration state does not list it.
"""

from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector
from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps
from django.db.models import Q

# Must be the expression and condition the search filters by (``selectors.
# MessageSearchDocument``, ``IsSearchedType``), else PostgreSQL cannot use the index;
# tests.threads_app.test_thread_search checks it does.
INDEX = GinIndex(
    SearchVector("output", config="english"),
    name="step_message_search",
    condition=Q(type__in=("user_message", "assistant_message")),
)


def add_index(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.add_index(apps.get_model("threads_app", "Step"), INDEX)


def remove_index(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.remove_index(apps.get_model("threads_app", "Step"), INDEX)


class Migration(migrations.Migration):
    dependencies = [("threads_app", "0004_feedback")]

    operations = [migrations.RunPython(add_index, remove_index)]
