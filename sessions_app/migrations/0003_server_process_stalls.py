from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0002_server_process_layer"),
    ]

    operations = [
        migrations.AddField(
            model_name="serverprocess",
            name="beat_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="serverprocess",
            name="db_application",
            field=models.CharField(blank=True, default="", max_length=63),
        ),
    ]
