"""``manage.py purge_uploads [--hours N]``: delete uploads older than N hours, and the elements
(with their files) of chats that ended before their thread was created.

Run it periodically, e.g. hourly from cron or a systemd timer:
``0 * * * * cd /srv/tether && .venv/bin/python manage.py purge_uploads``.
"""

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from media_app.elements import purge_orphans
from media_app.services import purge_uploads


class Command(BaseCommand):
    help = (
        "Delete uploads older than --hours (default UPLOAD_EXPIRY_HOURS). No message needs them: "
        "an engine-app send keeps its own copy of every photo it names, and a file an element "
        "shares stays while the element does."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--hours", type=float, default=None, help="Age in hours (default: the setting).")

    def handle(self, *args: Any, hours: float | None, **options: Any) -> None:
        age = float(settings.UPLOAD_EXPIRY_HOURS) if hours is None else hours
        if age < 0:
            raise CommandError("--hours must not be negative")
        deleted = purge_uploads(timedelta(hours=age))
        self.stdout.write(f"deleted {deleted} upload(s) older than {age:g} hours\n")
        orphans = purge_orphans(timedelta(hours=age))
        self.stdout.write(f"deleted {orphans} element(s) of chats that never started a thread\n")
