"""The one place botocore clients are built.

Every client gets botocore's adaptive retry mode (throttling such as
RequestLimitExceeded/Throttling is retried with client-side rate limiting), the
settings' region and, in the sandbox, the moto server's endpoint. Clients are
cached per warm container: building one costs ~0.1 s and they are thread-safe.
"""

from __future__ import annotations

import threading
from typing import Any

import boto3
from botocore.config import Config

from nodewright.settings import Settings

# Adaptive mode: retries with exponential backoff plus a client-side token bucket that slows
# the caller down when AWS throttles. 5 attempts: botocore's backoff waits up to 2, 4, 8 and 16 s
# between them, so a throttled call gives up within about 30 s, inside a 55 s invocation that
# must still report; 8 attempts (up to 90 s of backoff) let one CreateFleet outlive the function.
RETRY_CONFIG = Config(
    retries={"mode": "adaptive", "max_attempts": 5},
    user_agent_extra="nodewright",
    connect_timeout=5,
    read_timeout=30,
)

# The Pricing API has endpoints in a few regions only; us-east-1 serves every region's prices.
PRICING_API_REGION = "us-east-1"

_clients: dict[tuple[str, str, str | None, bool], Any] = {}
_session: boto3.session.Session | None = None  # one session: it caches the parsed service models
_lock = threading.Lock()


# For a caller that must answer within a second or two (the wake-up webhook, whose caller, the API
# server, waits at most 2 s): short timeouts, one retry.
QUICK_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 2},
    user_agent_extra="nodewright",
    connect_timeout=1,
    read_timeout=2,
)


def client(service: str, settings: Settings, region: str | None = None, *, quick: bool = False) -> Any:
    """A cached botocore client for ``service`` configured from ``settings`` (``quick``: short
    timeouts and one retry, for callers that answer someone waiting)."""
    global _session  # noqa: PLW0603 - the per-container session, built on first use
    region_name = region or settings.region
    endpoint = settings.service_endpoints.get(service.replace("-", "_")) or settings.aws_endpoint_url
    key = (service, region_name, endpoint, quick)
    with _lock:  # a boto3 Session is not thread-safe: build clients under the lock
        cached = _clients.get(key)
        if cached is None:
            _session = _session or boto3.session.Session()
            cached = _session.client(
                service,
                region_name=region_name,
                endpoint_url=endpoint,
                config=QUICK_CONFIG if quick else RETRY_CONFIG,
            )
            _clients[key] = cached
        return cached


def reset_clients() -> None:
    """Forget cached clients (tests that switch endpoints or moto contexts)."""
    with _lock:
        _clients.clear()
