"""Webhook deliveries: a box's complete integration responses, POSTed to its ``webhook_url``.

A delivery is one JSON body, sent as is on every attempt, with these headers:

- ``X-Tether-Signature: sha256=<hex>``: HMAC-SHA256 of the raw body, keyed with the box's
  ``webhook_secret`` (receivers compare it with ``hmac.compare_digest``);
- ``X-Tether-Delivery``: the delivery's id, the same on every retry (receivers deduplicate on it);
- ``X-Tether-Timestamp``: Unix seconds of this attempt.

A connection error, a timeout or a 5xx is retried after each of the delays in
``WEBHOOK_RETRY_DELAYS`` (seconds; the setting, else the environment variable as
``"0.5,1,2,4"``, else that default); a 2xx ends it, and so does any other status (a 4xx, a
redirect): the receiver refused it and sending it again would not change that. Everything
here is awaited on the event loop (aiohttp); nothing blocks it.
"""

import asyncio
import hashlib
import hmac
import json
import logging
import os
import time
import uuid
from typing import Any

import aiohttp
from channels.db import database_sync_to_async
from django.conf import settings

from threads_app.models import Box, new_webhook_secret

logger = logging.getLogger(__name__)

DEFAULT_RETRY_DELAYS = (0.5, 1.0, 2.0, 4.0)
DEFAULT_TIMEOUT = 10.0
SIGNATURE_HEADER = "X-Tether-Signature"
DELIVERY_HEADER = "X-Tether-Delivery"
TIMESTAMP_HEADER = "X-Tether-Timestamp"


def _setting(name: str) -> Any:
    value = getattr(settings, name, None)
    return value if value is not None else os.environ.get(name)


def retry_delays() -> list[float]:
    value = _setting("WEBHOOK_RETRY_DELAYS")
    if value is None:
        return list(DEFAULT_RETRY_DELAYS)
    if isinstance(value, str):
        return [float(part) for part in value.split(",") if part.strip()]
    return [float(part) for part in value]


def timeout() -> float:
    value = _setting("WEBHOOK_TIMEOUT")
    return float(value) if value is not None else DEFAULT_TIMEOUT


def sign(secret: str, body: bytes) -> str:
    """The ``X-Tether-Signature`` value of ``body``."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


@database_sync_to_async
def _secret_of(box: Box) -> str:
    """The box's signing key; one is generated (once, also under concurrency) when empty."""
    if not box.webhook_secret:
        Box.objects.filter(pk=box.pk, webhook_secret="").update(webhook_secret=new_webhook_secret())
        box.webhook_secret = Box.objects.filter(pk=box.pk).values_list("webhook_secret", flat=True).get()
    return box.webhook_secret


async def deliver(box: Box, payload: dict[str, Any]) -> bool:
    """POST ``payload`` to the box's webhook URL, retrying as described above.

    Returns whether the receiver took it (a 2xx). No URL: nothing is sent (False).
    """
    url = box.webhook_url
    if not url:
        return False
    body = json.dumps(payload, separators=(",", ":")).encode()
    delivery = uuid.uuid4().hex
    signature = sign(await _secret_of(box), body)
    delays = retry_delays()
    attempts = len(delays) + 1
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout())) as http:
        for attempt in range(1, attempts + 1):
            headers = {
                "Content-Type": "application/json",
                "User-Agent": "Tether-Webhook/1",
                SIGNATURE_HEADER: signature,
                DELIVERY_HEADER: delivery,
                TIMESTAMP_HEADER: str(int(time.time())),
            }
            try:
                async with http.post(url, data=body, headers=headers, allow_redirects=False) as response:
                    status = response.status
                    await response.read()
            except (aiohttp.ClientError, TimeoutError) as exc:
                problem = f"{type(exc).__name__}: {exc}"
            else:
                if 200 <= status < 300:
                    logger.info("webhook %s to %s delivered (attempt %d)", delivery, url, attempt)
                    return True
                if status < 500:
                    logger.warning("webhook %s to %s refused with %d; not retried", delivery, url, status)
                    return False
                problem = f"HTTP {status}"
            if attempt == attempts:
                break
            logger.info("webhook %s to %s failed (%s); retrying", delivery, url, problem)
            await asyncio.sleep(delays[attempt - 1])
    logger.error("webhook %s to %s failed after %d attempts (%s)", delivery, url, attempts, problem)
    return False
