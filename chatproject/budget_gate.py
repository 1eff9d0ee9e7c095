"""Repeats of a request a budget just refused are answered 429 here, in the ASGI layer,
before Django (``threads_app.recent_refusals`` says why and what is remembered)."""

import json
import math
from typing import Any

from rest_framework.exceptions import Throttled

from chatproject.body_limits import Receive, Scope, Send
from sessions_app import metrics
from threads_app.recent_refusals import headers_credential, recent_refusals


class BudgetGate:
    """Wraps the HTTP app. Every request costs one dictionary lookup here; only a request
    with a credential some ``BudgetThrottle`` refused on this route a moment ago is answered
    (as DRF answers it: 429, ``Retry-After`` and its ``detail``)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            who = headers_credential(scope.get("headers", []))
            wait = recent_refusals.wait(scope["method"], scope["path"], who) if who else None
            if wait is not None:
                metrics.budget_refusals.labels(metrics.REPEAT, metrics.HTTP).inc()
                await self._refuse(send, wait)
                return
        await self.app(scope, receive, send)

    @staticmethod
    async def _refuse(send: Send, wait: float) -> None:
        refused = Throttled(wait)
        body = json.dumps({"detail": str(refused.detail)}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": refused.status_code,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"retry-after", str(math.ceil(wait)).encode()),
                    (b"x-content-type-options", b"nosniff"),
                    (b"cache-control", b"no-store"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
