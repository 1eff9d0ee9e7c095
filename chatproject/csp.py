"""The Content-Security-Policy of the site's HTML pages, in one place.

Django 5.2 has no CSP support of its own. The chat page sets ``CHAT_PAGE_CSP`` in its view
(``chatproject.views``); the admin's pages are Django's views, so
``AdminContentSecurityPolicyMiddleware`` adds ``ADMIN_CSP`` to every response under the
admin's URL that has none. Django's admin (5.x) has no inline script, no event-handler
attribute and no ``style`` attribute in its templates (its scripts read their data from
``data-`` attributes and ``json_script`` blocks, which are not run), so it works under the
same strict ``script-src 'self'`` as the chat page.
"""

from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.deprecation import MiddlewareMixin

# The directives every page shares: nothing from other origins, no plugins, no framing, no
# form posted or <base> pointed elsewhere.
_COMMON = [
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    "object-src 'none'",
    "base-uri 'self'",
    "form-action 'self'",
    "frame-ancestors 'none'",
]

# The chat page loads only its own scripts and styles, and talks only to its own origin: a
# message that slipped past the sanitiser could still run nothing. Elements need no
# relaxation: a PDF is framed from this origin (default-src 'self'; the element endpoint sends
# it with ``Content-Security-Policy: sandbox``), and plotly.js, which would insert its
# stylesheet as an inline <style>, gets it as a static file instead (tether/elements.js), so
# ``style-src`` stays 'self' (its per-element styles are set through the CSSOM, which the
# policy allows).
CHAT_PAGE_CSP = "; ".join(
    [
        *_COMMON,
        # KaTeX (math in messages, math.js) positions glyphs with style attributes, some set
        # with setAttribute. A style attribute cannot run script; <style> elements and style
        # sheets from elsewhere stay refused, and DOMPurify still strips style from messages.
        "style-src-attr 'unsafe-inline'",
        "img-src 'self' data: blob:",
        "connect-src 'self'",
    ]
)

# The admin: its own scripts (jQuery, select2, the calendar...) and icons from this origin.
ADMIN_CSP = "; ".join([*_COMMON, "img-src 'self' data:"])


class AdminContentSecurityPolicyMiddleware(MiddlewareMixin):
    """``ADMIN_CSP`` on the admin's responses (its pages, login and jsi18n alike) that set
    no policy of their own. MiddlewareMixin runs it in the async stack without a thread."""

    def process_response(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        if request.path.startswith(reverse("admin:index")):  # the resolver caches it
            response.headers.setdefault("Content-Security-Policy", ADMIN_CSP)
        return response


# Chainlit's frontend (chainlit_frontend), served from a Chainlit build. Its index.html loads
# the Inter font's style sheet from Google Fonts and KaTeX's from jsDelivr (their font files
# from fonts.gstatic.com and jsDelivr); its two inline scripts (``const global = globalThis``
# and the injected ``window.theme``) run by their hashes, nothing else inline. Its
# components insert <style> elements at run time (Radix, sonner, KaTeX), so styles, unlike
# scripts, are allowed inline. It talks to this origin only (its API and socket are here).
CHAINLIT_STYLE_ORIGINS = ["https://fonts.googleapis.com", "https://cdn.jsdelivr.net"]
CHAINLIT_FONT_ORIGINS = ["https://fonts.gstatic.com", "https://cdn.jsdelivr.net"]


def chainlit_frontend_csp(script_hashes: list[str], font_urls: list[str]) -> str:
    """The policy of Chainlit's index page: ``script_hashes`` are its inline scripts',
    ``font_urls`` the origins of a theme's own font style sheets."""
    style_origins = [*CHAINLIT_STYLE_ORIGINS, *(o for o in font_urls if o not in CHAINLIT_STYLE_ORIGINS)]
    return "; ".join(
        [
            "default-src 'self'",
            " ".join(["script-src 'self'", *script_hashes]),
            " ".join(["style-src 'self' 'unsafe-inline'", *style_origins]),
            " ".join(["font-src 'self' data:", *CHAINLIT_FONT_ORIGINS]),
            "img-src 'self' data: blob:",
            "media-src 'self' blob:",
            "connect-src 'self'",
            "worker-src 'self' blob:",
            "object-src 'none'",
            "base-uri 'self'",
            "form-action 'self'",
            "frame-ancestors 'none'",
        ]
    )
