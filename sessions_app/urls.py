"""The HTTP sends (``views``): the chat's send endpoint and integration messages; feedback on
assistant messages (``feedback``); the project settings an empty chat reads (``project_views``);
clicks on action buttons (``action_views``)."""

from django.urls import path

from sessions_app.action_views import CallActionView
from sessions_app.feedback import FeedbackView
from sessions_app.project_views import ProjectSettingsView
from sessions_app.views import IntegrationMessageView, SendView

urlpatterns = [
    path("api/chat/send", SendView.as_view(), name="chat-send"),
    path("api/feedback", FeedbackView.as_view(), name="feedback"),
    path(
        "api/integrations/threads/<uuid:thread_id>/messages/",
        IntegrationMessageView.as_view(),
        name="integration-thread-message",
    ),
    path("api/project/settings", ProjectSettingsView.as_view(), name="project-settings"),
    path("api/project/action", CallActionView.as_view(), name="project-action"),
]
