"""The admin's pages carry a Content-Security-Policy (``chatproject.csp``), and render
under it: Django's admin templates have no inline script, event handler or style attribute
that the policy would block."""

import re
import uuid

import pytest
from django.test import Client

from chatproject.csp import ADMIN_CSP
from threads_app.services import default_box_for, ensure_thread

pytestmark = pytest.mark.django_db

# Markup the policy blocks: a <script> that is run and has no src, an on* handler attribute, a
# style attribute or element, a javascript: URL.
BLOCKED = [
    re.compile(r"<script(?![^>]*\bsrc=)(?![^>]*type=\"application/json\")[^>]*>", re.I),
    re.compile(r"<[^>]+\son[a-z]+\s*=", re.I),
    re.compile(r"<[^>]+\sstyle\s*=", re.I),
    re.compile(r"<style[\s>]", re.I),
    re.compile(r"javascript:", re.I),
]


@pytest.fixture
def admin_client_(django_user_model) -> Client:
    admin = django_user_model.objects.create_superuser(username="csp-admin", password="pw-for-tests-1")
    client = Client()
    client.force_login(admin)
    return client


def directives(policy: str) -> dict[str, str]:
    return dict(part.strip().split(" ", 1) for part in policy.split(";"))


def test_the_admin_policy_allows_nothing_from_elsewhere_and_no_inline_script() -> None:
    policy = directives(ADMIN_CSP)
    assert policy["default-src"] == policy["script-src"] == policy["style-src"] == "'self'"
    assert policy["object-src"] == "'none'" and policy["frame-ancestors"] == "'none'"
    assert "unsafe-inline" not in ADMIN_CSP and "unsafe-eval" not in ADMIN_CSP


def test_admin_pages_carry_the_policy_and_render_without_markup_it_blocks(admin_client_, django_user_model):
    owner = django_user_model.objects.create_user(username="csp-owner", password="pw-for-tests-1")
    thread, _ = ensure_thread(owner, uuid.uuid4(), name="a thread")
    box = default_box_for(owner)
    pages = [
        "/admin/",
        "/admin/threads_app/thread/",
        f"/admin/threads_app/thread/{thread.pk}/change/",
        "/admin/threads_app/box/add/",
        f"/admin/threads_app/box/{box.pk}/change/",
        "/admin/auth/user/add/",
        f"/admin/auth/user/{owner.pk}/change/",
        "/admin/sessions_app/socketsession/",
        "/admin/jsi18n/",
    ]
    for page in pages:
        response = admin_client_.get(page)
        assert response.status_code == 200, page
        assert response["Content-Security-Policy"] == ADMIN_CSP, page
        if response["Content-Type"].startswith("text/html"):
            html = response.content.decode()
            assert "</html>" in html, page
            for pattern in BLOCKED:
                assert not pattern.search(html), (page, pattern.search(html))


def test_the_admin_login_page_carries_it_too_and_the_chat_page_keeps_its_own(client, django_user_model):
    login = client.get("/admin/login/")
    assert login.status_code == 200 and login["Content-Security-Policy"] == ADMIN_CSP
    client.force_login(django_user_model.objects.create_user(username="csp-user", password="pw-for-tests-1"))
    chat = client.get("/")
    assert chat.status_code == 200
    assert chat["Content-Security-Policy"] != ADMIN_CSP
    assert "style-src-attr 'unsafe-inline'" in chat["Content-Security-Policy"]
    assert "Content-Security-Policy" not in client.get("/api/project/settings").headers
