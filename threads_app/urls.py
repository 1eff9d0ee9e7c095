"""The threads API under ``/api/``."""

from django.urls import include, path
from rest_framework.routers import DefaultRouter

from threads_app.api import ThreadViewSet

router = DefaultRouter()
router.register("threads", ThreadViewSet, basename="thread")

urlpatterns = [path("api/", include(router.urls))]
