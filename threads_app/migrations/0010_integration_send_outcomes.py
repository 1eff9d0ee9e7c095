"""Integration sends record their turn's outcome from now on (``integration_turns._answer``),
so that the recovery loop can tell a turn a dead process left open. Sends transcribed before
had no outcome; their turns ended long ago, so they are marked replied rather than taken for
cut turns."""

from django.db import migrations


def mark_replied(apps, schema_editor):
    AcceptedMessage = apps.get_model("threads_app", "AcceptedMessage")
    AcceptedMessage.objects.filter(source="integration", state="transcribed", outcome="").update(outcome="replied")


class Migration(migrations.Migration):
    dependencies = [
        ("threads_app", "0009_thread_text_bytes"),
    ]

    operations = [migrations.RunPython(mark_replied, migrations.RunPython.noop)]
