"""Chainlit's frontend routes, included under ``CHAINLIT_PATH_PREFIX`` after everything else
there (``chatproject.urls``): Chainlit's HTTP API at the same prefix answers first, and any
other GET gets the single-page app's index.html, as Chainlit's catch-all route does."""

from django.urls import path, re_path

from chainlit_frontend import views

app_name = "chainlit_frontend"
urlpatterns = [
    path("assets/<path:name>", views.asset, name="asset"),
    path("copilot/<path:name>", views.copilot_file, name="copilot"),
    path("public/<path:name>", views.public_file, name="public"),
    path("favicon", views.favicon, name="favicon"),
    path("logo", views.logo, name="logo"),
    path("avatars/<str:avatar_id>", views.avatar, name="avatar"),
    path("", views.index, name="index"),
    re_path(r"^(?P<route>.+)$", views.index, name="route"),
]
