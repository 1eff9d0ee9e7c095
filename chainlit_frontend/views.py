"""Chainlit's frontend and copilot as Chainlit's server serves them, under
``CHAINLIT_PATH_PREFIX``: index.html for every route of the single-page app, the build's
files, the copilot's script, the favicon, logo and avatars. Without a configured build every
one of them is a 404, so Tether's own page stays the only one.

Cache headers: files under ``assets/`` carry a content hash in their names, so browsers keep
them a year without asking; index.html and the copilot's ``index.js`` keep their names
across releases, so browsers revalidate them (``Last-Modified``) on every load.
"""

import functools
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase, JsonResponse
from django.views.decorators.http import require_safe
from django.views.static import serve

from chainlit_frontend import build

IMMUTABLE = "public, max-age=31536000, immutable"
REVALIDATE = "no-cache"
AVATAR_ID = re.compile(r"^[a-zA-Z0-9_ .-]+$")


def _build_or_404() -> None:
    try:
        build.build_dir()
    except build.BuildMissing as missing:
        raise Http404(str(missing)) from missing


def _file(request: HttpRequest, root: Path, name: str, cache: str) -> HttpResponseBase:
    """A file under ``root`` (Django's ``serve`` refuses paths out of it and answers
    If-Modified-Since), with ``cache`` as its Cache-Control."""
    response = serve(request, name, document_root=str(root))
    response["Cache-Control"] = cache
    # The build's text is UTF-8; a page of another origin that names no charset would read
    # the copilot's script in its own and fail on it (Chainlit's server names it too).
    kind = response.get("Content-Type", "")
    if kind.startswith("text/") and "charset" not in kind:
        response["Content-Type"] = f"{kind}; charset=utf-8"
    return response


@require_safe
def index(request: HttpRequest, route: str = "") -> HttpResponse:
    """The app's page for any of its routes (``/``, ``/thread/<id>``, ``/login``...)."""
    _build_or_404()
    page = build.page()
    response = HttpResponse(page.html, content_type="text/html; charset=utf-8")
    response["Cache-Control"] = REVALIDATE
    response["Content-Security-Policy"] = page.csp
    return response


def page_for_reads(api_view: Callable[..., HttpResponseBase]) -> Callable[..., HttpResponseBase]:
    """A path both the app's router and Chainlit's API use (``/login``: the sign-in page, and
    the sign-in POST): reads get the page when a build is configured, the rest ``api_view``."""

    @functools.wraps(api_view)
    def view(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if request.method in ("GET", "HEAD") and build.is_configured():
            return index(request)
        return api_view(request, *args, **kwargs)

    return view


@require_safe
def asset(request: HttpRequest, name: str) -> HttpResponseBase:
    _build_or_404()
    return _file(request, build.frontend_dir() / "assets", name, IMMUTABLE)


@require_safe
def copilot_file(request: HttpRequest, name: str) -> HttpResponseBase:
    """The copilot widget's script (``<prefix>/copilot/index.js``) and its files, loaded by
    pages of other origins with a plain <script src>."""
    _build_or_404()
    return _file(request, build.copilot_dir(), name, REVALIDATE)


@require_safe
def public_file(request: HttpRequest, name: str) -> HttpResponseBase:
    """A file of the app's Chainlit ``public/`` directory (``<prefix>/public/theme.json``...)."""
    _build_or_404()
    public = build.public_dir()
    try:
        if public is None:
            raise Http404("No CHAINLIT_PUBLIC_DIR")
        return _file(request, public, name, REVALIDATE)
    except Http404:
        # As Chainlit answers: the copilot asks for public/theme.json, and reads the error as JSON.
        return JsonResponse({"detail": "File not found"}, status=404)


def _public_file(stem: str) -> Path | None:
    """``public/<stem>.*`` of the app's Chainlit public directory, as Chainlit looks it up."""
    public = build.public_dir()
    if public is None:
        return None
    return next((p for p in sorted(public.glob(f"{stem}.*")) if p.is_file()), None)


@require_safe
def favicon(request: HttpRequest) -> HttpResponseBase:
    _build_or_404()
    return _path(request, _public_file("favicon") or build.frontend_dir() / "favicon.svg")


@require_safe
def logo(request: HttpRequest) -> HttpResponseBase:
    """``logo?theme=light|dark``: the app's ``public/logo_<theme>.*``, else the build's."""
    _build_or_404()
    theme = "dark" if request.GET.get("theme") == "dark" else "light"
    found = _public_file(f"logo_{theme}") or next(
        iter(sorted((build.frontend_dir() / "assets").glob(f"logo_{theme}*.*"))), None
    )
    return _path(request, found or build.frontend_dir() / f"logo_{theme}.svg")


@require_safe
def avatar(request: HttpRequest, avatar_id: str) -> HttpResponseBase:
    """``public/avatars/<name>.*`` for an author's name (lower case, ``_`` for spaces and
    dots), else the favicon, as Chainlit answers."""
    _build_or_404()
    if not AVATAR_ID.match(avatar_id):
        raise Http404("Invalid avatar id")
    stem = avatar_id.strip().lower().replace(" ", "_").replace(".", "_")
    public = build.public_dir()
    if public is not None and (public / "avatars").is_dir():
        found = next((p for p in sorted((public / "avatars").glob(f"{stem}.*")) if p.is_file()), None)
        if found is not None:
            return _path(request, found)
    return favicon(request)


def _path(request: HttpRequest, path: Path) -> HttpResponseBase:
    if not path.is_file():
        raise Http404("No such file")
    return _file(request, path.parent, path.name, REVALIDATE)
