"""A Chainlit frontend build on disk, and its ``index.html`` with what Chainlit's server
injects into it (``chainlit/server.py``, ``get_html_template``).

A build directory holds ``frontend/`` (Chainlit's ``frontend/dist``: ``index.html``,
``assets/``, ``favicon.svg``, ``logo_*.svg``) and ``copilot/`` (its ``copilot/dist``:
``index.js``, ``assets/``); ``manage.py install_chainlit_frontend`` writes one. The page is
rendered once per build, prefix and theme, and read again when a file it comes from changes.
"""

import base64
import functools
import hashlib
import html
import json
import re
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from chatproject.csp import chainlit_frontend_csp

# Chainlit's placeholders in its index.html.
TAGS_PLACEHOLDER = "<!-- TAG INJECTION PLACEHOLDER -->"
JS_PLACEHOLDER = "<!-- JS INJECTION PLACEHOLDER -->"
FONT_BLOCK = re.compile(r"(<!-- FONT START -->).*?(<!-- FONT END -->)", re.DOTALL)
INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)
# What Chainlit's page announces when the app configures no meta URL and image of its own.
META_URL = "https://github.com/Chainlit/chainlit"
META_IMAGE_URL = "https://chainlit-cloud.s3.eu-west-3.amazonaws.com/logo/chainlit_banner.png"


class BuildMissing(LookupError):
    """No usable build where ``CHAINLIT_FRONTEND_DIR`` points (or it is unset)."""


@dataclass(frozen=True)
class Page:
    """The frontend's index.html as served, and the policy that lets exactly its scripts run."""

    html: str
    csp: str


def root_path() -> str:
    """The prefix as Chainlit's clients join paths to it: ``/chainlit``, or ``""`` at the root."""
    return str(settings.CHAINLIT_PATH_PREFIX).rstrip("/")


def build_dir() -> Path:
    """The configured build directory; ``BuildMissing`` when unset or without a frontend."""
    root = settings.CHAINLIT_FRONTEND_DIR
    if root is None:
        raise BuildMissing("CHAINLIT_FRONTEND_DIR is not set")
    if not (Path(root) / "frontend" / "index.html").is_file():
        raise BuildMissing(f"{root} has no frontend/index.html (manage.py install_chainlit_frontend)")
    return Path(root)


def is_configured() -> bool:
    try:
        build_dir()
    except BuildMissing:
        return False
    return True


def frontend_dir() -> Path:
    return build_dir() / "frontend"


def copilot_dir() -> Path:
    return build_dir() / "copilot"


def public_dir() -> Path | None:
    """The app's Chainlit ``public/`` directory, if one is configured."""
    public = settings.CHAINLIT_PUBLIC_DIR
    return Path(public) if public is not None else None


def _stamp(path: Path | None) -> int:
    """A file's modification time, so that a reinstalled build or an edited theme is read again."""
    try:
        return path.stat().st_mtime_ns if path is not None else 0
    except FileNotFoundError:
        return 0


def page() -> Page:
    """The index page for the SPA's routes, under today's settings and files."""
    index = frontend_dir() / "index.html"
    public = public_dir()
    theme = public / "theme.json" if public is not None else None
    return _render(index, _stamp(index), theme, _stamp(theme), root_path(), settings.CHAINLIT_UI_NAME)


@functools.lru_cache(maxsize=8)
def _render(
    index: Path, _index_stamp: int, theme_file: Path | None, _theme_stamp: int, prefix: str, name: str
) -> Page:
    theme = json.loads(theme_file.read_text(encoding="utf-8")) if theme_file and theme_file.is_file() else {}
    content = index.read_text(encoding="utf-8")
    content = content.replace(TAGS_PLACEHOLDER, _tags(prefix, name))
    content = content.replace(JS_PLACEHOLDER, _globals_script(theme))
    fonts = theme.get("custom_fonts")
    if isinstance(fonts, list):
        links = "\n".join(f'<link rel="stylesheet" href="{html.escape(str(url))}">' for url in fonts)
        content = FONT_BLOCK.sub(lambda m: m.group(1) + links + m.group(2), content)
    # Chainlit's build refers to its files from the root; under a prefix they move with it.
    content = content.replace('href="/', f'href="{prefix}/').replace('src="/', f'src="{prefix}/')
    hashes = [_sha256(script) for script in INLINE_SCRIPT.findall(content)]
    return Page(html=content, csp=chainlit_frontend_csp(script_hashes=hashes, font_urls=_origins(fonts)))


def _tags(prefix: str, name: str) -> str:
    """Chainlit's title, icon and link-preview tags; ``og:root_path`` is where the frontend
    finds its API and its socket (``<prefix>/ws/socket.io``)."""
    name = html.escape(name)
    prefix_attr = html.escape(prefix)
    return f"""<title>{name}</title>
    <link rel="icon" href="/favicon" />
    <meta name="description" content="">
    <meta property="og:type" content="website">
    <meta property="og:title" content="{name}">
    <meta property="og:description" content="">
    <meta property="og:image" content="{META_IMAGE_URL}">
    <meta property="og:url" content="{META_URL}">
    <meta property="og:root_path" content="{prefix_attr}">"""


def _globals_script(theme: dict[str, object]) -> str:
    """``window.theme`` from the app's theme.json, as Chainlit sets it. ``window.transports``
    stays unset: Tether serves long-polling and WebSocket alike, so the client's default
    (polling, then the upgrade) works. ``<`` is escaped so a value cannot close the script."""
    variables = theme.get("variables")
    line = f"window.theme = {json.dumps(variables)};" if variables else "undefined"
    return "<script>\n" + line.replace("<", "\\u003c") + "\nundefined\n</script>"


def _sha256(script: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(script.encode()).digest()).decode() + "'"


def _origins(urls: object) -> list[str]:
    """The origins of a theme's font style sheets, which the policy must then allow."""
    if not isinstance(urls, list):
        return []
    found = []
    for url in urls:
        match = re.match(r"^(https://[^/\s'\";]+)/", str(url))
        if match and match.group(1) not in found:
            found.append(match.group(1))
    return found
