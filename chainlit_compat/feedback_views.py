"""``PUT`` / ``DELETE /feedback`` and ``POST /project/action`` at Chainlit's paths: Tether's
own views (``sessions_app.feedback``, ``sessions_app.action_views``, which already take
Chainlit's payloads and answer in its shapes), with their budgets, and authenticated as the
rest of Chainlit's API is (Origin-checked, no CSRF token)."""

from chainlit_compat.origin_check import CHAINLIT_AUTHENTICATION, NOT_IN_SCHEMA
from sessions_app.action_views import CallActionView
from sessions_app.feedback import FeedbackView


@NOT_IN_SCHEMA
class ChainlitFeedbackView(FeedbackView):
    authentication_classes = CHAINLIT_AUTHENTICATION


@NOT_IN_SCHEMA
class ChainlitActionView(CallActionView):
    authentication_classes = CHAINLIT_AUTHENTICATION
