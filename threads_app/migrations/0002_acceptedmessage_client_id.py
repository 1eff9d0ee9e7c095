"""Sends keep the client's message id in ``client_id``; their key is scoped by the thread.

Rows accepted before this migration keep their key (the client's id, unscoped) and get it as
``client_id`` too; only a resend of such a message made after the upgrade would not find it.
"""

from django.db import migrations, models


def copy_ids(apps, schema_editor):
    AcceptedMessage = apps.get_model("threads_app", "AcceptedMessage")
    AcceptedMessage.objects.update(client_id=models.F("id"))


class Migration(migrations.Migration):
    dependencies = [("threads_app", "0001_initial")]

    operations = [
        migrations.AddField(
            model_name="acceptedmessage",
            name="client_id",
            field=models.UUIDField(editable=False, null=True),
        ),
        migrations.RunPython(copy_ids, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="acceptedmessage",
            name="client_id",
            field=models.UUIDField(editable=False),
        ),
    ]
