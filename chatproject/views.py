"""The web UI's pages: the chat (a new one, or a thread resumed at ``/thread/<id>/``)."""

import uuid
from typing import cast

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.csrf import ensure_csrf_cookie

from chatproject.csp import CHAT_PAGE_CSP
from sessions_app.editing import can_edit_in
from threads_app.models import FEEDBACK_COMMENT_MAX, Thread
from threads_app.selectors import get_owned_thread


@login_required
@ensure_csrf_cookie
def home(request: HttpRequest) -> HttpResponse:
    """A new chat."""
    return _chat_page(request, None)


@login_required
@ensure_csrf_cookie
def thread_page(request: HttpRequest, thread_id: uuid.UUID) -> HttpResponse:
    """One of the user's threads, resumed; anyone else's (or a deleted one) is a 404."""
    thread = get_owned_thread(cast(User, request.user), thread_id)  # login_required
    if thread is None:
        raise Http404("No such chat.")
    return _chat_page(request, thread)


def _chat_page(request: HttpRequest, thread: Thread | None) -> HttpResponse:
    config = {
        "threadId": str(thread.pk) if thread else None,
        "threadName": thread.name if thread else "",
        "chatProfile": thread.chat_profile if thread else "",
        # What the composer lets users attach (the upload endpoint checks it again, by content).
        "uploads": {"accept": settings.UPLOAD_ALLOWED_TYPES, "maxBytes": settings.UPLOAD_MAX_BYTES},
        # Whether the page offers "Edit" on sent messages.
        "canEdit": can_edit_in(cast(User, request.user), thread),
    }
    context = {
        "thread": thread,
        "chat_config": config,
        "feedback_comment_max": FEEDBACK_COMMENT_MAX,
        "photos_only": all(t.startswith("image/") for t in settings.UPLOAD_ALLOWED_TYPES),
    }
    response = render(request, "chat.html", context)
    response["Content-Security-Policy"] = CHAT_PAGE_CSP
    return response
