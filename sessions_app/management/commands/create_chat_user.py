"""``manage.py create_chat_user NAME``: a user with an API token, for integrators and demos."""

from typing import Any

from django.contrib.auth import get_user_model, password_validation
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from sessions_app import tokens
from threads_app.services import default_box_for


class Command(BaseCommand):
    help = "Create a chat user (with their box and an API token) and print the token."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument(
            "--password",
            help="Set this password (default: unusable; token only). It must pass AUTH_PASSWORD_VALIDATORS.",
        )
        parser.add_argument(
            "--if-missing",
            action="store_true",
            help="Do nothing (but print the token, renewed if it expired) if the user exists.",
        )

    def handle(
        self, *args: Any, username: str, password: str | None, if_missing: bool, **options: Any
    ) -> None:
        User = get_user_model()
        user = User.objects.filter(username=username).first()
        if user is not None and not if_missing:
            raise CommandError(f"user {username!r} already exists")
        if user is None:
            if password is not None:
                try:
                    password_validation.validate_password(password, User(username=username))
                except ValidationError as exc:
                    raise CommandError("password refused: " + " ".join(exc.messages)) from None
            user = User.objects.create_user(username=username, password=password)
            if password is None:
                user.set_unusable_password()
                user.save(update_fields=["password"])
        default_box_for(user)
        token = tokens.issue(user)
        self.stdout.write(f"user: {username}\ntoken: {token.key}\n")
