"""Chainlit's frontend as Tether serves it from the pinned Chainlit build (in process, through
Django's test client): the single-page app's routes get Chainlit's index.html with Chainlit's
injections under the prefix, a policy that lets exactly its inline scripts run, and files with
cache headers; without ``CHAINLIT_FRONTEND_DIR`` nothing is served there."""

import base64
import hashlib
import json
import re
import uuid
from pathlib import Path

import pytest
from django.test import Client, override_settings

from tests.support.chainlit_build import chainlit_build_dir

PREFIX = "/chainlit"


@pytest.fixture(scope="module")
def build() -> Path:
    return chainlit_build_dir()


@pytest.fixture
def served(build, settings):
    settings.CHAINLIT_FRONTEND_DIR = build
    settings.CHAINLIT_PUBLIC_DIR = None
    return Client()


def _policy(response) -> dict[str, list[str]]:
    directives = [d.split() for d in response["Content-Security-Policy"].split(";")]
    return {d[0]: d[1:] for d in directives if d}


def _hash(script: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(script.encode()).digest()).decode() + "'"


@pytest.mark.django_db
def test_without_a_build_nothing_is_served_under_the_prefix(settings):
    settings.CHAINLIT_FRONTEND_DIR = None
    client = Client()
    for path in ["/", "/thread/x", "/assets/index.js", "/copilot/index.js", "/favicon", "/logo"]:
        response = client.get(PREFIX + path)
        assert response.status_code == 404, (path, response.status_code)
    # Tether's own page is where it was.
    assert Client().get("/").status_code == 302


@pytest.mark.parametrize("route", ["/", "/thread/" + str(uuid.uuid4()), "/login", "/element/abc", "/share/x"])
def test_every_route_of_the_app_gets_chainlits_page_under_the_prefix(served, route):
    response = served.get(PREFIX + route)
    assert response.status_code == 200, response
    page = response.content.decode()
    assert response["Content-Type"] == "text/html; charset=utf-8"
    assert response["Cache-Control"] == "no-cache"
    # Chainlit's injections: the title and preview tags, the root path the app finds its API
    # and socket under, the globals script; the build's own files moved under the prefix.
    assert '<meta property="og:root_path" content="/chainlit">' in page, page[:2000]
    assert "<title>Tether</title>" in page and f'href="{PREFIX}/favicon"' in page
    assert "INJECTION PLACEHOLDER" not in page.replace("<!-- CSS INJECTION PLACEHOLDER -->", "")
    scripts = re.findall(r'<script type="module" crossorigin src="([^"]+)"', page)
    assert scripts and all(s.startswith(f"{PREFIX}/assets/index-") for s in scripts), scripts
    assert not re.search(r'(?:href|src)="/(?!chainlit/)', page), page


def test_the_policy_runs_exactly_the_pages_inline_scripts(served):
    response = served.get(PREFIX + "/")
    policy = _policy(response)
    inline = re.findall(r"<script>(.*?)</script>", response.content.decode(), re.DOTALL)
    assert len(inline) == 2, inline  # `const global = globalThis` and Chainlit's globals
    assert sorted(policy["script-src"]) == sorted(["'self'", *(_hash(s) for s in inline)]), policy
    assert "'unsafe-inline'" not in policy["script-src"] and "'unsafe-eval'" not in policy["script-src"]
    assert policy["connect-src"] == ["'self'"] and policy["default-src"] == ["'self'"]
    assert policy["frame-ancestors"] == ["'none'"] and policy["object-src"] == ["'none'"]


def test_a_theme_is_injected_as_chainlit_does_and_cannot_close_the_script(served, settings, tmp_path):
    (tmp_path / "theme.json").write_text(
        json.dumps({"variables": {"light": {"--primary": "10 20% 30%", "x": "</script><script>alert(1)"}}})
    )
    settings.CHAINLIT_PUBLIC_DIR = tmp_path
    response = served.get(PREFIX + "/")
    page = response.content.decode()
    (globals_script,) = [s for s in re.findall(r"<script>(.*?)</script>", page, re.DOTALL) if "theme" in s]
    assert 'window.theme = {"light": {"--primary": "10 20% 30%"' in globals_script, globals_script
    assert "alert(1)" in globals_script and "</script><script>alert" not in page
    assert _hash(globals_script) in _policy(response)["script-src"]


def test_the_build_files_are_served_with_their_cache_headers(served):
    page = served.get(PREFIX + "/").content.decode()
    (script,) = re.findall(r'src="(/chainlit/assets/index-[^"]+\.js)"', page)
    response = served.get(script)
    assert response.status_code == 200
    assert response["Content-Type"] == "text/javascript; charset=utf-8"
    assert response["Cache-Control"] == "public, max-age=31536000, immutable"
    # A revalidation of an unchanged file is a 304.
    again = served.get(script, HTTP_IF_MODIFIED_SINCE=response["Last-Modified"])
    assert again.status_code == 304

    copilot = served.get(PREFIX + "/copilot/index.js")
    assert copilot.status_code == 200 and copilot["Content-Type"] == "text/javascript; charset=utf-8"
    assert copilot["Cache-Control"] == "no-cache" and copilot["Last-Modified"]
    assert b"mountChainlitWidget" in b"".join(copilot.streaming_content)


def test_paths_out_of_the_build_are_refused(served):
    for path in ["/assets/../index.html", "/assets/%2e%2e/%2e%2e/SOURCE.json", "/copilot/../SOURCE.json"]:
        response = served.get(PREFIX + path)
        assert response.status_code == 404 or b"<html" in response.content[:200], (path, response)
        assert b'"chainlit_version"' not in getattr(response, "content", b""), path


def test_favicon_logo_and_avatars_come_from_the_apps_public_dir_else_the_build(served, settings, tmp_path):
    assert served.get(PREFIX + "/favicon")["Content-Type"] == "image/svg+xml"
    assert served.get(PREFIX + "/logo?theme=dark")["Content-Type"] == "image/svg+xml"
    (tmp_path / "avatars").mkdir()
    (tmp_path / "avatars" / "my_bot.png").write_bytes(b"\x89PNG avatar")
    (tmp_path / "logo_dark.png").write_bytes(b"\x89PNG logo")
    settings.CHAINLIT_PUBLIC_DIR = tmp_path
    avatar = served.get(PREFIX + "/avatars/My Bot")
    assert b"".join(avatar.streaming_content) == b"\x89PNG avatar"
    assert b"".join(served.get(PREFIX + "/logo?theme=dark").streaming_content) == b"\x89PNG logo"
    # An author without an avatar gets the favicon, as Chainlit answers.
    assert served.get(PREFIX + "/avatars/nobody")["Content-Type"] == "image/svg+xml"
    # A name that climbs out of avatars/ is no avatar: the outside file is never sent.
    (tmp_path / "secret.png").write_bytes(b"\x89PNG secret")
    for name in ["..%2Fsecret", "..", "...", "..%5Csecret"]:
        response = served.get(PREFIX + "/avatars/" + name)
        body = response.content if not response.streaming else b"".join(response.streaming_content)
        assert b"secret" not in body, (name, response)


def test_the_page_answers_only_reads(served):
    assert served.post(PREFIX + "/thread/x").status_code in (403, 405)
    assert served.head(PREFIX + "/").status_code == 200


@override_settings(CHAINLIT_PATH_PREFIX="/elsewhere")
def test_the_root_path_follows_the_prefix(served):
    # The URL patterns are fixed at start; the page's links follow the setting it reads.
    page = served.get(PREFIX + "/").content.decode()
    assert '<meta property="og:root_path" content="/elsewhere">' in page


@pytest.mark.django_db
def test_the_sign_in_path_is_the_apps_page_for_reads_and_chainlits_login_for_posts(served, django_user_model):
    django_user_model.objects.create_user("ann", password="pw-of-ann")
    page = served.get(PREFIX + "/login")
    assert page.status_code == 200 and b"og:root_path" in page.content
    signed_in = served.post(PREFIX + "/login", {"username": "ann", "password": "pw-of-ann"})
    assert signed_in.status_code == 200 and signed_in["Content-Type"] == "application/json", signed_in
    assert served.get(PREFIX + "/user").json()["identifier"] == "ann"
