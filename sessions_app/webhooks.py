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
redirect): the receiver refused it and sending it again would not change that. Each attempt
is one call of ``attempt``; an integration response's delivery is durable: every attempt is a
task in the database (``sessions_app.webhook_tasks``), so it survives a restart of every
process and ends delivered or dead-lettered.
"""

import dataclasses
import enum
import hashlib
import hmac
import json
import logging
import time
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


class Outcome(enum.Enum):
    """How one attempt ended."""

    DELIVERED = "delivered"  # a 2xx
    REFUSED = "refused"  # another status, or a forbidden destination: not sent again
    FAILED = "failed"  # a connection error, a timeout or a 5xx: worth another attempt


@dataclasses.dataclass(frozen=True)
class Attempt:
    outcome: Outcome
    problem: str = ""


def encode(payload: dict[str, Any]) -> bytes:
    """A delivery's body, the same bytes on every attempt."""
    return json.dumps(payload, separators=(",", ":")).encode()


async def attempt(box: Box, body: bytes, delivery: str, number: int = 1) -> Attempt:
    """POST ``body`` to the box's webhook URL once (attempt ``number`` of ``delivery``)."""
    url = box.webhook_url
    if not url:
        return Attempt(Outcome.REFUSED, "the box has no webhook URL")
    secret = box.webhook_secret or await _secret_of(box)
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
            await _read_capped(response, max_response_bytes())
    except webhook_targets.ForbiddenDestination as exc:
        logger.error("webhook %s to %s refused: %s", delivery, url, exc)
        return Attempt(Outcome.REFUSED, f"forbidden destination: {exc}")
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        return Attempt(Outcome.FAILED, f"{type(exc).__name__}: {exc}")
    if 200 <= status < 300:
        logger.info("webhook %s to %s delivered (attempt %d)", delivery, url, number)
        return Attempt(Outcome.DELIVERED)
    if status < 500:
        logger.warning("webhook %s to %s refused with %d; not retried", delivery, url, status)
        return Attempt(Outcome.REFUSED, f"HTTP {status}")
    return Attempt(Outcome.FAILED, f"HTTP {status}")
