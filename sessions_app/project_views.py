"""``GET /api/project/settings``: what the page reads before the first message (Chainlit's
project settings read, in part): the app's chat profiles and the starters to show.

The app's hooks run for the signed-in user (``app_settings``); a failing hook is logged and
reads as an empty list, never an error for the page.
"""

from typing import Any, cast

from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from sessions_app import app_settings
from sessions_app.views import DetailSerializer


class StarterSerializer(serializers.Serializer[Any]):
    label = serializers.CharField()  # type: ignore[assignment]  # a field named like Field.label
    message = serializers.CharField(help_text="Sent as the user's message when the starter is chosen.")
    icon = serializers.CharField(allow_null=True, help_text="An image URL, or null.")


class ChatProfileSerializer(serializers.Serializer[Any]):
    name = serializers.CharField(help_text="What the client sends as chatProfile.")
    display_name = serializers.CharField(allow_null=True)
    markdown_description = serializers.CharField(allow_blank=True)
    icon = serializers.CharField(allow_null=True)
    default = serializers.BooleanField(help_text="The profile a new chat starts with.")
    starters = StarterSerializer(
        many=True, allow_null=True, help_text="This profile's starters (replacing the app's), or null."
    )


class ProjectSettingsSerializer(serializers.Serializer[Any]):
    chatProfiles = ChatProfileSerializer(many=True, help_text="Empty when the app defines no profiles.")
    chatProfile = serializers.CharField(
        allow_blank=True,
        help_text="The profile a new chat asking for chat_profile gets: that one, or the default.",
    )
    starters = StarterSerializer(many=True, help_text="The starters to show with that profile.")


class ProjectSettingsQuerySerializer(serializers.Serializer[Any]):
    chat_profile = serializers.CharField(
        required=False, allow_blank=True, max_length=app_settings.MAX_NAME_CHARS, default=""
    )


class ProjectSettingsView(APIView):
    @extend_schema(
        operation_id="project_settings",
        summary="The app's chat profiles and the starters an empty chat shows",
        parameters=[
            OpenApiParameter(
                "chat_profile",
                OpenApiTypes.STR,
                OpenApiParameter.QUERY,
                required=False,
                description="The profile chosen (or remembered); unknown or absent: the default.",
            )
        ],
        responses={
            200: ProjectSettingsSerializer,
            400: OpenApiResponse(OpenApiTypes.OBJECT, description="A chat_profile over 255 characters."),
            401: OpenApiResponse(
                DetailSerializer, description="No valid credentials (a token or a session)."
            ),
        },
    )
    def get(self, request: Request) -> Response:
        query = ProjectSettingsQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        # The app's hooks are coroutines: on the server's loop (under daphne), the request's
        # thread waiting (they are meant to return a list, not to start work that outlives it).
        found = async_to_sync(app_settings.project_settings)(
            cast(User, request.user), query.validated_data["chat_profile"]
        )
        return Response(found.to_dict())
