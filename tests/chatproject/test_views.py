"""The web UI's pages: sign-in, the chat page, a thread's page, sign-out, and their assets."""

import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.contrib.staticfiles import finders
from django.test import Client

from threads_app.models import Box
from threads_app.services import ensure_thread, soft_delete_thread

pytestmark = pytest.mark.django_db

STATIC = Path(__file__).resolve().parents[2] / "sessions_app" / "static" / "tether"


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user(username="alice", password="pw-for-tests-1")


@pytest.fixture
def client_for(user):
    def make(who=user) -> Client:
        client = Client()
        client.force_login(who)
        return client

    return make


def chat_config(response) -> dict[str, Any]:
    match = re.search(
        r'<script id="chat-config" type="application/json">(.*?)</script>', response.content.decode()
    )
    assert match, "the page carries its configuration"
    config: dict[str, Any] = json.loads(match.group(1))
    return config


def test_the_chat_needs_a_signed_in_user():
    response = Client().get("/")
    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/?next=/"
    thread_page = Client().get(f"/thread/{uuid.uuid4()}/")
    assert thread_page.status_code == 302 and thread_page["Location"].startswith("/accounts/login/")


def test_the_sign_in_page_has_a_labelled_form():
    page = Client().get("/accounts/login/").content.decode()
    assert '<label for="id_username">' in page and '<label for="id_password">' in page
    assert "csrfmiddlewaretoken" in page


def test_a_new_chat_page_sets_the_csrf_cookie_and_a_strict_content_security_policy(client_for):
    response = client_for().get("/")
    assert response.status_code == 200
    assert [t.name for t in response.templates][:2] == ["chat.html", "base.html"]
    assert "csrftoken" in response.cookies  # the client's API calls send it back
    assert chat_config(response) == {
        "threadId": None,
        "threadName": "",
        "chatProfile": "",
        # The composer attaches what the upload endpoint takes: photos unless configured.
        "uploads": {"accept": ["image/jpeg", "image/png", "image/gif", "image/webp"], "maxBytes": 10_000_000},
        "canEdit": True,  # the default app's echo engine can forget what followed a message
    }
    csp = response["Content-Security-Policy"]
    directives = dict(d.strip().split(" ", 1) for d in csp.split(";"))
    assert directives["script-src"] == "'self'" and directives["object-src"] == "'none'"
    assert directives["style-src"] == "'self'" and directives["default-src"] == "'self'"
    # The one relaxation: style attributes (KaTeX's math layout), which cannot run script.
    assert [name for name, value in directives.items() if "unsafe" in value] == ["style-src-attr"]
    assert directives["style-src-attr"] == "'unsafe-inline'"
    page = response.content.decode()
    assert '<script type="module" src="/static/tether/chat.js">' in page
    assert 'aria-live="polite"' in page and 'id="banner"' in page
    # Signing out is a POST form with its CSRF token.
    assert re.search(
        r'<form method="post" action="/accounts/logout/" class="logout">\s*<input type="hidden" name="csrfmiddlewaretoken"',
        page,
    )


def test_a_thread_page_resumes_one_of_the_users_threads(client_for, user):
    thread, _ = ensure_thread(
        user, uuid.uuid4(), name="</script><script>alert(1)</script>", chat_profile="</script>Reverse"
    )
    response = client_for().get(f"/thread/{thread.pk}/")
    assert response.status_code == 200
    # The thread's profile, for the page to show read-only (the chat keeps it).
    assert chat_config(response) == {
        "threadId": str(thread.pk),
        "threadName": thread.name,
        "chatProfile": "</script>Reverse",
        "uploads": {"accept": ["image/jpeg", "image/png", "image/gif", "image/webp"], "maxBytes": 10_000_000},
        "canEdit": True,
    }
    page = response.content.decode()
    assert "<script>alert(1)</script>" not in page  # the name is escaped everywhere
    assert "csrftoken" in response.cookies


def test_the_page_offers_edit_where_the_chats_engine_can_forget_what_followed_a_message(
    client_for, user, settings
):
    """Engine-runtime apps: "Edit" follows the engine of the chat's box (the thread's, else the
    box the user's new chats go to); Claude Code cannot forget, echo and OpenAI can. A hooks
    app: whether it has ``on_message``."""
    client = client_for()
    thread, _ = ensure_thread(user, uuid.uuid4(), name="echoed")
    assert chat_config(client.get("/"))["canEdit"] is True
    Box.objects.filter(pk=thread.box_id).update(engine=Box.Engine.CLAUDE)
    assert chat_config(client.get("/"))["canEdit"] is False
    assert chat_config(client.get(f"/thread/{thread.pk}/"))["canEdit"] is False
    Box.objects.filter(pk=thread.box_id).update(engine=Box.Engine.OPENAI)
    assert chat_config(client.get(f"/thread/{thread.pk}/"))["canEdit"] is True
    Box.objects.filter(pk=thread.box_id).update(engine=Box.Engine.CLAUDE)
    settings.CHAT_APP = "tests.apps.lifecycle_app"  # its hooks answer, whatever the box names
    assert chat_config(client.get(f"/thread/{thread.pk}/"))["canEdit"] is True


def test_a_thread_that_is_not_the_users_is_a_404_page(client_for, user, django_user_model):
    bob = django_user_model.objects.create_user(username="bob", password="pw-for-tests-1")
    bobs, _ = ensure_thread(bob, uuid.uuid4(), name="bob's")
    deleted, _ = ensure_thread(user, uuid.uuid4(), name="gone")
    soft_delete_thread(deleted)
    client = client_for()
    for path in (
        f"/thread/{bobs.pk}/",
        f"/thread/{deleted.pk}/",
        f"/thread/{uuid.uuid4()}/",
        "/thread/nope/",
    ):
        response = client.get(path)
        assert response.status_code == 404, path
        assert "Not found" in response.content.decode()
        assert "bob's" not in response.content.decode()


def test_signing_out_takes_a_post(client_for):
    client = client_for()
    assert client.get("/accounts/logout/").status_code == 405
    response = client.post("/accounts/logout/")
    assert response.status_code == 302 and response["Location"] == "/accounts/login/"
    assert client.get("/").status_code == 302


@pytest.mark.parametrize(
    "path",
    [
        "tether/chat.js",
        "tether/api.js",
        "tether/reconcile.js",
        "tether/transcript.js",
        "tether/render.js",
        "tether/photos.js",
        "tether/sidebar.js",
        "tether/tether.css",
        "tether/favicon.svg",
    ],
)
def test_the_client_is_served_as_static_files(path):
    assert finders.find(path) is not None


def test_every_vendored_library_is_pinned_and_ships_its_licence():
    vendor = STATIC / "vendor"
    readme = (vendor / "README.md").read_text()
    for library, licence, version in [
        ("socket.io.esm.min.js", "socket.io-client.LICENSE", "4.8.4"),
        ("marked.esm.js", "marked.LICENSE.md", "18.2.1"),
        ("purify.es.mjs", "dompurify.LICENSE", "3.5.0"),
    ]:
        assert (vendor / library).is_file() and (vendor / licence).is_file()
        assert version in (vendor / library).read_text()[:400]
        assert f"`{library}`" in readme and version in readme
    # Every module the client imports is a relative path on this server: nothing from a CDN.
    for module in STATIC.glob("*.js"):
        for target in re.findall(r'^import .*? from "([^"]+)";', module.read_text(), re.M):
            assert target.startswith("./"), (module.name, target)
            assert (STATIC / target).is_file(), (module.name, target)
