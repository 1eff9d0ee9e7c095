"""The app's sign-in callbacks on Django's auth: Chainlit's ``password_auth_callback`` and
``header_auth_callback`` decide who signs in, and a Django account carries the session.

- ``AppPasswordBackend`` (in ``AUTHENTICATION_BACKENDS``, after django-axes' lockout check and
  before the model backend): the login page's username and password go to the app's
  ``password_auth_callback``; a ``chat.User`` it returns signs in. When it returns None the
  model backend still tries the account's own password, so admins and the accounts made
  with ``create_chat_user`` keep signing in; a failure counts towards the lockout as before.
- ``header_sign_in`` (a middleware after Django's auth middleware): a request of a signed-out
  browser goes to the app's ``header_auth_callback`` with its headers; a ``chat.User`` it
  returns signs the browser in (a session cookie, as a login would give), so the page and then
  its socket are signed in.

A ``chat.User`` signs in as the Django account named by its ``identifier``, created on its
first sign-in without a usable password (its ``display_name`` as the first name). An app
never signs anyone in as a staff, superuser or inactive account: such a name is refused.
"""

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import async_to_sync, iscoroutinefunction, sync_to_async
from django.contrib.auth import alogin, get_user_model, login
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import User as Account
from django.http import HttpRequest, HttpResponseBase
from django.utils.decorators import sync_and_async_middleware

from sessions_app.chat.hooks import Hook, load_app
from sessions_app.chat.user import User

logger = logging.getLogger(__name__)

BACKEND = "sessions_app.app_auth.AppPasswordBackend"


def account_for(app_user: Any, callback: str) -> Account | None:
    """The Django account ``app_user`` (what ``callback`` returned) signs in as, or None."""
    if app_user is None:
        return None
    if not isinstance(app_user, User) or not isinstance(app_user.identifier, str) or not app_user.identifier:
        logger.error(
            "%s returned %r, not a chat.User with an identifier: nobody signs in", callback, app_user
        )
        return None
    display_name = (app_user.display_name or "")[:150]
    account, created = get_user_model().objects.get_or_create(
        username=app_user.identifier[:150], defaults={"first_name": display_name}
    )
    if created:
        account.set_unusable_password()
        account.save(update_fields=["password"])
    if account.is_staff or account.is_superuser or not account.is_active:
        logger.warning(
            "%s named the account %r, which is staff, superuser or inactive: refused",
            callback,
            account.get_username(),
        )
        return None
    return account


class AppPasswordBackend(ModelBackend):
    """Asks the app's ``password_auth_callback``; without one it signs nobody in (the model
    backend after it checks passwords as before)."""

    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> Account | None:
        callback = load_app().password_auth_callback
        if callback is None or username is None or password is None:
            return None
        try:
            app_user = async_to_sync(callback)(username, password)
        except Exception:
            logger.exception("password_auth_callback failed: nobody signs in")
            return None
        return account_for(app_user, "password_auth_callback")


async def _account_of_headers(callback: Hook, request: HttpRequest) -> Account | None:
    try:
        app_user = await callback(request.headers)
    except Exception:
        logger.exception("header_auth_callback failed: nobody signs in")
        return None
    return await sync_to_async(account_for)(app_user, "header_auth_callback")


Handler = Callable[[HttpRequest], Any]


@sync_and_async_middleware
def header_sign_in(get_response: Handler) -> Handler:
    """Sign a signed-out browser in with the app's ``header_auth_callback``, when it has one."""
    if iscoroutinefunction(get_response):

        async def signing_in(request: HttpRequest) -> HttpResponseBase:
            callback = load_app().header_auth_callback
            if callback is not None and not (await request.auser()).is_authenticated:
                account = await _account_of_headers(callback, request)
                if account is not None:
                    await alogin(request, account, backend=BACKEND)
            response: Awaitable[HttpResponseBase] = get_response(request)
            return await response

        return signing_in

    def signing_in_sync(request: HttpRequest) -> HttpResponseBase:
        callback = load_app().header_auth_callback
        if callback is not None and not request.user.is_authenticated:
            account = async_to_sync(_account_of_headers)(callback, request)
            if account is not None:
                login(request, account, backend=BACKEND)
        response: HttpResponseBase = get_response(request)
        return response

    return signing_in_sync
