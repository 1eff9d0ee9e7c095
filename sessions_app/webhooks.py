"""Webhook deliveries: a box's complete integration responses, POSTed to its ``webhook_url``.

A delivery is one JSON body, sent as is on every attempt, with these headers:

- ``X-Tether-Delivery``: the delivery's id, the same on every retry (receivers deduplicate on it);
- ``X-Tether-Timestamp``: Unix seconds of this attempt;
- ``X-Tether-Signature: sha256=<hex>``: HMAC-SHA256, keyed with the box's ``webhook_secret``,
  of ``<timestamp>.<delivery>.`` followed by the raw body. Receivers recompute it (compare with
  ``hmac.compare_digest``), refuse a timestamp more than a few minutes old and a delivery id
  they already took: a captured delivery then cannot be replayed, neither later (the
  timestamp is signed) nor as another delivery (so is the id).

Only public addresses are delivered to (``sessions_app.webhook_targets``: checked after DNS
resolution on every attempt; ``WEBHOOK_ALLOWED_HOSTS`` makes exceptions); a refused
destination ends the delivery. At most ``WEBHOOK_MAX_RESPONSE_BYTES`` of a receiver's answer
are read (64 KiB): the rest is never downloaded, whatever the receiver sends.

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
import time
import uuid
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from django.conf import settings

from sessions_app import webhook_targets
from sessions_app.database import database_sync_to_async
from threads_app.models import Box
from threads_app.services import ensure_webhook_secret

logger = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-Tether-Signature"
DELIVERY_HEADER = "X-Tether-Delivery"
TIMESTAMP_HEADER = "X-Tether-Timestamp"


def retry_delays() -> list[float]:
    """Seconds between attempts (``WEBHOOK_RETRY_DELAYS``)."""
    return [float(part) for part in settings.WEBHOOK_RETRY_DELAYS]


def timeout() -> float:
    return float(settings.WEBHOOK_TIMEOUT)


def max_response_bytes() -> int:
    return int(settings.WEBHOOK_MAX_RESPONSE_BYTES)


def sign(secret: str, timestamp: str, delivery: str, body: bytes) -> str:
    """The ``X-Tether-Signature`` value of one attempt: the timestamp, the delivery id and the body."""
    signed = f"{timestamp}.{delivery}.".encode() + body
    return "sha256=" + hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()


async def _read_capped(response: aiohttp.ClientResponse, limit: int) -> int:
    """Read the answer up to ``limit`` bytes and stop; how many were read."""
    read = 0
    async for chunk in response.content.iter_chunked(16 * 1024):
        read += len(chunk)
        if read >= limit:
            break
    return read


@database_sync_to_async
def _secret_of(box: Box) -> str:
    """The box's signing key; one is generated (once, also under concurrency) when empty."""
    if not box.webhook_secret:
        box.webhook_secret = ensure_webhook_secret(box.pk)
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
    secret = await _secret_of(box)
    delays = retry_delays()
    attempts = len(delays) + 1
    cap = max_response_bytes()
    for attempt in range(1, attempts + 1):
        timestamp = str(int(time.time()))
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "Tether-Webhook/1",
            SIGNATURE_HEADER: sign(secret, timestamp, delivery, body),
            DELIVERY_HEADER: delivery,
            TIMESTAMP_HEADER: timestamp,
        }
        try:
            webhook_targets.check_literal(urlsplit(url).hostname or "")
            async with (
                aiohttp.ClientSession(
                    connector=aiohttp.TCPConnector(**webhook_targets.connector_options()),
                    timeout=aiohttp.ClientTimeout(total=timeout()),
                ) as http,
                http.post(url, data=body, headers=headers, allow_redirects=False) as response,
            ):
                status = response.status
                await _read_capped(response, cap)
        except webhook_targets.ForbiddenDestination as exc:
            logger.error("webhook %s to %s refused: %s", delivery, url, exc)
            return False
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
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
