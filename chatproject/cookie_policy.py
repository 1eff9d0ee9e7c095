"""Which sites' pages a browser sends the session cookie from (``SESSION_COOKIE_SAMESITE``).

``Lax`` (Django's default, and Chainlit's) goes with every request from a page of the same
*site* (another port or subdomain of the registrable domain) and with top-level navigations;
a copilot host page or a Chainlit frontend on another site is therefore never signed in.
``None`` lets it go with requests from any site, which browsers accept only on a ``Secure``
cookie (they drop a ``SameSite=None`` cookie without it), so that combination is refused at
start rather than shipped as a sign-in that silently never sticks. Which of those pages may use
the cookie is still decided by their Origin (``sessions_app.origin``: the socket, its polling
and Chainlit's API refuse an origin that is not ours nor in ``CSRF_TRUSTED_ORIGINS``).
"""

from django.core.exceptions import ImproperlyConfigured

SAME_SITE_VALUES = {"lax": "Lax", "strict": "Strict", "none": "None"}


def session_cookie_samesite(value: str | None, *, secure: bool) -> str:
    """Django's ``SESSION_COOKIE_SAMESITE`` from the environment's ``value`` (any case; unset:
    ``Lax``); ImproperlyConfigured for an unknown value, or ``None`` without ``secure``."""
    if value is None or not value.strip():
        return "Lax"
    same_site = SAME_SITE_VALUES.get(value.strip().lower())
    if same_site is None:
        raise ImproperlyConfigured(
            f"SESSION_COOKIE_SAMESITE={value!r}: expected Lax, Strict or None (the cross-site sign-in)."
        )
    if same_site == "None" and not secure:
        raise ImproperlyConfigured(
            "SESSION_COOKIE_SAMESITE=None needs a Secure session cookie (browsers drop a "
            "SameSite=None cookie without it): set DJANGO_ENV=production, or "
            "SESSION_COOKIE_SECURE=1 and serve Tether over HTTPS."
        )
    return same_site
