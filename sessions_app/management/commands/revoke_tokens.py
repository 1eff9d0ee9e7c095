"""``manage.py revoke_tokens USER...`` / ``--expired``: end API tokens before or after their time."""

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from sessions_app import tokens


class Command(BaseCommand):
    help = (
        "Revoke (delete) the API tokens of the named users, or with --expired every token past "
        "API_TOKEN_LIFETIME_DAYS. A revoked token stops working at once, on the API and the socket."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("usernames", nargs="*", metavar="USER")
        parser.add_argument("--expired", action="store_true", help="Revoke every expired token.")

    def handle(self, *args: Any, usernames: list[str], expired: bool, **options: Any) -> None:
        if not usernames and not expired:
            raise CommandError("name at least one USER, or pass --expired")
        User = get_user_model()
        revoked = 0
        if usernames:
            users = User.objects.filter(**{f"{User.USERNAME_FIELD}__in": usernames})
            unknown = sorted(set(usernames) - {user.get_username() for user in users})
            if unknown:
                raise CommandError(f"no such user: {', '.join(unknown)}")
            revoked += tokens.revoke_for(users)
        if expired:
            revoked += tokens.revoke_expired()
        self.stdout.write(f"revoked {revoked} token(s)\n")
