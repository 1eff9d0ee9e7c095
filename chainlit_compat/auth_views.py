"""Signing in as Chainlit's frontend does, on Django's auth.

- ``GET /auth/config``: what the login page offers. Tether's chat always needs an account
  (``requireLogin``); a username and password always work (``passwordAuth``: the app's
  ``password_auth_callback`` when it has one, else the account's own password, as on
  ``/accounts/login/``); ``headerAuth`` when the app has a ``header_auth_callback``; no OAuth.
- ``POST /login`` (form ``username``, ``password``): Django's ``authenticate`` (django-axes'
  lockout included: its middleware answers 429) then ``login``. The session cookie is the
  credential the frontend's requests and its socket carry (``sessions_app.auth``), where
  Chainlit sets its JWT cookie.
- ``POST /auth/jwt`` (``Authorization: Bearer <key>``, what Chainlit's copilot sends with its
  ``accessToken``): Tether issues no JWTs, so the bearer is a Tether API token
  (``manage.py`` or the admin issue them); a live one signs the browser in as its user, never
  as a staff or superuser account.
- ``POST /auth/header``: the app's ``header_auth_callback``, already asked by
  ``sessions_app.app_auth.header_sign_in`` for a signed-out request, signed the browser in.
- ``POST /logout``; ``GET /user`` (Chainlit's PersistedUser dict, 401 when signed out).
- ``POST /set-session-cookie``: answered as Chainlit answers it, without the cookie: Chainlit
  pins a session's requests to one process with it; Tether's sessions need no stickiness.

These views take no CSRF token (Chainlit's frontend sends none): a POST from another site's
page is refused by its Origin (``origin_check``).
"""

from typing import Any, cast

from django.contrib.auth import authenticate, login, logout
from django.contrib.auth.models import User
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from chainlit_compat.origin_check import CHAINLIT_AUTHENTICATION, NOT_IN_SCHEMA, foreign_origin
from sessions_app.chat.hooks import load_app
from sessions_app.tokens import ExpiringTokenAuthentication
from threads_app.wire import iso

SIGN_IN_FAILED = "credentialssignin"  # the key Chainlit's login page translates
MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"


def user_dict(user: User) -> dict[str, Any]:
    """A Django account as Chainlit's ``PersistedUser``."""
    return {
        "id": str(user.pk),
        "identifier": user.get_username(),
        "display_name": user.first_name or user.get_username(),
        "metadata": {},
        "createdAt": iso(user.date_joined),
    }


def _signed_in() -> JsonResponse:
    return JsonResponse({"success": True})


def _sign_in_failed() -> JsonResponse:
    return JsonResponse({"detail": SIGN_IN_FAILED}, status=401)


def _refused(reason: str) -> JsonResponse:
    return JsonResponse({"detail": reason}, status=403)


@require_GET
def auth_config(request: HttpRequest) -> JsonResponse:
    return JsonResponse(
        {
            "requireLogin": True,
            "passwordAuth": True,
            "headerAuth": load_app().header_auth_callback is not None,
            "oauthProviders": [],
            "default_theme": "dark",
            "ui": {
                "login_page_image": None,
                "login_page_image_filter": None,
                "login_page_image_dark_filter": None,
            },
        }
    )


@NOT_IN_SCHEMA
class UserView(APIView):
    authentication_classes = CHAINLIT_AUTHENTICATION

    def get(self, request: Request) -> Response:
        return Response(user_dict(cast(User, request.user)))


@csrf_exempt
@require_POST
def sign_in(request: HttpRequest) -> JsonResponse:
    if (refusal := foreign_origin(request)) is not None:
        return _refused(refusal)
    username, password = request.POST.get("username"), request.POST.get("password")
    if not username or password is None:
        return _sign_in_failed()
    account = authenticate(request, username=username, password=password)
    if account is None:
        return _sign_in_failed()
    login(request, account)
    return _signed_in()


@csrf_exempt
@require_POST
def token_sign_in(request: HttpRequest) -> JsonResponse:
    if (refusal := foreign_origin(request)) is not None:
        return _refused(refusal)
    scheme, _, key = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        return JsonResponse({"detail": "Authorization header missing"}, status=401)
    try:
        account, _token = ExpiringTokenAuthentication().authenticate_credentials(key.strip())
    except AuthenticationFailed:
        return JsonResponse({"detail": "Invalid token"}, status=401)
    if account.is_staff or account.is_superuser:
        # An API token never becomes a session of the admin's (the admin takes sessions only).
        return JsonResponse({"detail": "Invalid token"}, status=401)
    login(request, account, backend=MODEL_BACKEND)
    return _signed_in()


@csrf_exempt
@require_POST
def header_sign_in(request: HttpRequest) -> JsonResponse:
    if (refusal := foreign_origin(request)) is not None:
        return _refused(refusal)
    if load_app().header_auth_callback is None:
        return JsonResponse({"detail": "No header_auth_callback defined"}, status=400)
    return _signed_in() if request.user.is_authenticated else _sign_in_failed()


@csrf_exempt
@require_POST
def sign_out(request: HttpRequest) -> JsonResponse:
    if (refusal := foreign_origin(request)) is not None:
        return _refused(refusal)
    logout(request)
    return _signed_in()


@csrf_exempt
@require_POST
def session_cookie(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"message": "Session cookie set"})
