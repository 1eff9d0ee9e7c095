"""Which URLs an app may give the page to load or link to: an element's ``url`` (http(s) or
a path on this server) and a starter's or profile's ``icon`` (a path on this server).

The page puts them in ``src`` and ``href`` as they are, so what counts is how a browser reads
them, not how they look: ``//host/x`` and ``/\\host/x`` are another origin (a browser reads a
backslash as a slash in http(s) URLs), and tabs and newlines are dropped anywhere in a URL, so
``/<tab>/host`` is ``//host``. A URL with a backslash, a control character or white space is
refused whole (a real one has them percent-encoded). The page's CSP stops loads from other
origins too; this is the check that does not rely on it.
"""

from urllib.parse import urlsplit


def _plain(url: str) -> bool:
    """No character a browser drops or rewrites on the way: controls, white space, ``\\``."""
    return not any(char <= " " or char == "\x7f" or char == "\\" for char in url)


def is_server_path(url: str) -> bool:
    """``url`` is a path on this server (``/static/x.png``), not another origin."""
    return _plain(url) and url.startswith("/") and not url.startswith("//")


def is_web_url(url: str) -> bool:
    """``url`` is an absolute http(s) URL with a host."""
    if not _plain(url):
        return False
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. an unclosed IPv6 bracket
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def is_link_url(url: str) -> bool:
    """``url`` may be an element's link: http(s), or a path on this server."""
    return is_web_url(url) or is_server_path(url)
