"""The one check of URLs the page loads or links to (``chatproject.page_urls``), read the
way a browser reads them: ``//host`` and ``/\\host`` are another origin, and tabs and
newlines are dropped before a URL is parsed."""

import pytest

from chatproject.page_urls import is_link_url, is_server_path, is_web_url

OTHER_ORIGINS = [
    "//evil.example/x.png",
    "/\\evil.example/x.png",
    "\\\\evil.example/x.png",
    "/\t/evil.example/x.png",
    "/\n/evil.example/x.png",
    " //evil.example/x.png",
    "\x00//evil.example",
]
NOT_LINKS = [
    "javascript:alert(1)",
    " javascript:alert(1)",
    "java\tscript:alert(1)",
    "data:text/html,x",
    "https:evil.example",
    "https:/evil.example",
    "https:\\\\evil.example",
    "https://",
    "ftp://example.com/x",
    "x.png",
    "",
    "http://[::1",
]


@pytest.mark.parametrize("url", OTHER_ORIGINS + NOT_LINKS)
def test_other_origins_and_other_schemes_are_refused(url: str) -> None:
    assert not is_link_url(url)
    assert not is_server_path(url)


@pytest.mark.parametrize("url", ["/static/hi.svg", "/", "/api/elements/1?x=//y", "/a%2F%2Fb", "/ü.png"])
def test_paths_on_this_server_are_paths_and_links(url: str) -> None:
    assert is_server_path(url) and is_link_url(url) and not is_web_url(url)


@pytest.mark.parametrize("url", ["https://example.com/r.pdf", "http://example.com", "HTTPS://Example.com/a"])
def test_http_urls_with_a_host_are_links_but_not_paths(url: str) -> None:
    assert is_web_url(url) and is_link_url(url) and not is_server_path(url)
