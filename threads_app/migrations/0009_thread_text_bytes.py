"""``Thread.text_bytes``: the step text a thread holds, against ``THREAD_MAX_BYTES``.

Existing threads are counted once here, in characters (the databases' ``length``; bytes for
ASCII text, fewer for other text): close enough for a budget, and one aggregate per thread
instead of reading every step's text into Python.
"""

from django.db import migrations, models
from django.db.models import OuterRef, Subquery, Sum, Value
from django.db.models.functions import Coalesce, Length


def count_existing(apps, schema_editor):
    Thread = apps.get_model("threads_app", "Thread")
    Step = apps.get_model("threads_app", "Step")
    per_thread = (
        Step.objects.filter(thread_id=OuterRef("pk"))
        .order_by()
        .values("thread_id")
        .annotate(total=Sum(Length("input") + Length("output")))
        .values("total")
    )
    Thread.objects.update(text_bytes=Coalesce(Subquery(per_thread), Value(0)))


class Migration(migrations.Migration):
    dependencies = [("threads_app", "0008_step_search_document")]

    operations = [
        migrations.AddField(
            model_name="thread",
            name="text_bytes",
            field=models.BigIntegerField(default=0),
        ),
        migrations.RunPython(count_existing, migrations.RunPython.noop),
    ]
