"""The one path Chainlit's frontend and Chainlit's API share, ``<prefix>/login``: the
frontend's sign-in page for reads (when a build is configured), Chainlit's login for posts
(``chainlit_compat``). Included under the prefix before Chainlit's API (``chatproject.urls``)."""

from django.urls import path

from chainlit_compat import auth_views
from chainlit_frontend.views import page_for_reads

urlpatterns = [path("login", page_for_reads(auth_views.sign_in), name="chainlit-login-page")]
