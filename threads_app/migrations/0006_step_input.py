"""A step's input (what a tool call or an app's ``chat.Step`` was given), beside its output."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("threads_app", "0005_step_message_search"),
    ]

    operations = [
        migrations.AddField(
            model_name="step",
            name="input",
            field=models.TextField(blank=True, default=""),
        ),
    ]
