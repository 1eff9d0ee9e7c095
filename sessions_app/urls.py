"""The HTTP sends (``views``): the chat's send endpoint and integration messages."""

from django.urls import path

from sessions_app.views import IntegrationMessageView, SendView

urlpatterns = [
    path("api/chat/send", SendView.as_view(), name="chat-send"),
    path(
        "api/integrations/threads/<uuid:thread_id>/messages/",
        IntegrationMessageView.as_view(),
        name="integration-thread-message",
    ),
]
