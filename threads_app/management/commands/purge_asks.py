"""``manage.py purge_asks [--days N]``: delete the records of asks whose deadline passed more
than N days ago (default 7). Run it periodically, like ``purge_uploads``."""

from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from threads_app.asks import purge_asks


class Command(BaseCommand):
    help = (
        "Delete ask records whose deadline passed more than --days ago. The questions and the "
        "text answers stay in the transcript; only the records of the waits go."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--days", type=float, default=7.0, help="Age in days past the deadline (default 7)."
        )

    def handle(self, *args: Any, days: float, **options: Any) -> None:
        if days < 0:
            raise CommandError("--days must not be negative")
        deleted = purge_asks(timedelta(days=days))
        self.stdout.write(f"deleted {deleted} ask(s) past their deadline for over {days:g} days\n")
