"""What Chainlit's frontend reads before it opens the socket:

- ``GET /project/settings?language=&chat_profile=``: Chainlit's project settings. The app's
  chat profiles and starters come from the same hooks as ``GET /api/project/settings``
  (``sessions_app.app_settings``); ``ui`` and ``features`` say what Tether does (uploads as
  ``UPLOAD_ALLOWED_TYPES`` and ``UPLOAD_MAX_BYTES`` allow; no audio, MCP, sharing, favorites
  nor message editing); threads persist, and resume when the app has ``on_chat_resume``.
- ``GET /project/translations?language=``: the frontend's strings, from the Chainlit build's
  translation files (``CHAINLIT_TRANSLATIONS_DIR``): the language asked, else its base
  language or another region of it, else ``en-US``; without that directory, an empty
  translation (the frontend then shows its keys).
"""

import json
import re
from pathlib import Path
from typing import Any, cast

from asgiref.sync import async_to_sync
from django.conf import settings
from django.contrib.auth.models import User
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from chainlit_compat.origin_check import CHAINLIT_AUTHENTICATION, NOT_IN_SCHEMA
from media_app import files
from sessions_app import app_settings
from sessions_app.chat.hooks import load_app
from sessions_app.editing import can_edit_in

# A BCP 47 tag as Chainlit accepts it (``en``, ``en-US``, ``zh-Hant-TW``): never a path.
LANGUAGE = re.compile(r"^[a-zA-Z]{2,3}(-[a-zA-Z0-9]{2,4})?(-[a-zA-Z0-9]{2,8})?$")
DEFAULT_LANGUAGE = "en-US"


def ui_settings() -> dict[str, Any]:
    """Chainlit's ``ui`` section, at Tether's choices."""
    return {
        "name": "Tether",
        "description": "",
        "cot": "full",
        "default_theme": "dark",
        "language": None,
        "layout": "default",
        "default_sidebar_state": "open",
        "chat_settings_location": "message_composer",
        "default_chat_settings_open": False,
        "confirm_new_chat": True,
        "github": None,
        "custom_css": None,
        "custom_css_attributes": "",
        "custom_js": None,
        "alert_style": "classic",
        "custom_js_attributes": "defer",
        "login_page_image": None,
        "login_page_image_filter": None,
        "login_page_image_dark_filter": None,
        "custom_meta_url": None,
        "custom_meta_image_url": None,
        "logo_file_url": None,
        "default_avatar_file_url": None,
        "avatar_size": None,
        "custom_build": None,
        "header_links": None,
    }


def features(user: User) -> dict[str, Any]:
    """Chainlit's ``features`` section: what Tether's socket and endpoints do (for ``user``'s
    new chats: whether they take edits depends on the engine of the user's box)."""
    return {
        "spontaneous_file_upload": {
            "enabled": True,
            "accept": files.allowed_types(),
            "max_files": 20,
            "max_size_mb": max(1, files.max_upload_bytes() // 1_000_000),
        },
        "audio": {"enabled": False, "sample_rate": 24000},
        "mcp": {"enabled": False, "servers": [], "user_servers": {"enabled": False}},
        "slack": {"reaction_on_message_received": False},
        "latex": False,
        "user_message_markdown": True,
        "user_message_autoscroll": True,
        "assistant_message_autoscroll": True,
        "unsafe_allow_html": False,
        "auto_tag_thread": True,
        "edit_message": can_edit_in(user, None),  # Chainlit's frontend offers "Edit" where this holds
        "allow_thread_sharing": False,
        "favorites": False,
    }


class SettingsQuerySerializer(serializers.Serializer[Any]):
    language = serializers.RegexField(LANGUAGE, required=False, default=DEFAULT_LANGUAGE)
    chat_profile = serializers.CharField(
        required=False, allow_blank=True, max_length=app_settings.MAX_NAME_CHARS, default=""
    )


@NOT_IN_SCHEMA
class ProjectSettingsView(APIView):
    authentication_classes = CHAINLIT_AUTHENTICATION

    def get(self, request: Request) -> Response:
        query = SettingsQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        found = async_to_sync(app_settings.project_settings)(
            cast(User, request.user), query.validated_data["chat_profile"]
        )
        offered = found.to_dict()
        return Response(
            {
                "ui": ui_settings(),
                "features": features(cast(User, request.user)),
                "userEnv": [],
                "maskUserEnv": False,
                "dataPersistence": True,
                "threadResumable": load_app().on_chat_resume is not None,
                "threadSharing": False,
                "markdown": None,
                "chatProfiles": offered["chatProfiles"],
                "starters": offered["starters"],
                "starterCategories": [],
                "debugUrl": None,
            }
        )


def translation(language: str) -> dict[str, Any]:
    """The translation file for ``language`` (or its base language, or ``en-US``)."""
    directory = settings.CHAINLIT_TRANSLATIONS_DIR
    if not directory or not LANGUAGE.match(language):
        return {}
    base = language.split("-")[0]
    regional = sorted(p.stem for p in Path(directory).glob(f"{base}-*.json"))
    candidates = [language, base, *regional, DEFAULT_LANGUAGE]
    for name in candidates:
        path = Path(directory) / f"{name}.json"
        if path.is_file():
            loaded = json.loads(path.read_text(encoding="utf-8"))
            return loaded if isinstance(loaded, dict) else {}
    return {}


@require_GET
def project_translations(request: HttpRequest) -> JsonResponse:
    language = request.GET.get("language") or DEFAULT_LANGUAGE
    if not LANGUAGE.match(language):
        return JsonResponse({"detail": "language must be a language tag such as en-US"}, status=400)
    return JsonResponse({"translation": translation(language)})
