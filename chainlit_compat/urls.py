"""Chainlit's HTTP API at Chainlit's paths (no trailing slash), under ``CHAINLIT_PATH_PREFIX``
(``chatproject/urls.py``)."""

from django.urls import path

from chainlit_compat import auth_views, feedback_views, file_views, project_views, thread_views

urlpatterns = [
    path("auth/config", auth_views.auth_config, name="chainlit-auth-config"),
    path("user", auth_views.UserView.as_view(), name="chainlit-user"),
    path("login", auth_views.sign_in, name="chainlit-login"),
    path("logout", auth_views.sign_out, name="chainlit-logout"),
    path("auth/jwt", auth_views.token_sign_in, name="chainlit-token-auth"),
    path("auth/header", auth_views.header_sign_in, name="chainlit-header-auth"),
    path("set-session-cookie", auth_views.session_cookie, name="chainlit-session-cookie"),
    path("feedback", feedback_views.ChainlitFeedbackView.as_view(), name="chainlit-feedback"),
    path("project/action", feedback_views.ChainlitActionView.as_view(), name="chainlit-action"),
    path("project/file", file_views.ChainlitUploadView.as_view(), name="chainlit-file-upload"),
    path("project/file/<str:file_id>", file_views.ChainlitFileView.as_view(), name="chainlit-file"),
    path("project/translations", project_views.project_translations, name="chainlit-translations"),
    path("project/settings", project_views.ProjectSettingsView.as_view(), name="chainlit-project-settings"),
    path("project/threads", thread_views.ThreadListView.as_view(), name="chainlit-threads"),
    path("project/thread", thread_views.ThreadChangeView.as_view(), name="chainlit-thread-change"),
    path("project/thread/<str:thread_id>", thread_views.ThreadView.as_view(), name="chainlit-thread"),
    path(
        "project/thread/<str:thread_id>/element/<str:element_id>",
        thread_views.ThreadElementView.as_view(),
        name="chainlit-thread-element",
    ),
]
