"""The one place botocore clients are built.

Every client gets botocore's adaptive retry mode (throttling such as
RequestLimitExceeded/Throttling is retried with client-side rate limiting), the
settings' region and, in the sandbox, the moto server's endpoint. Clients are
cached per warm container: building one costs ~0.1 s and they are thread-safe.

A client signs with the credentials the settings were read with (``Settings.aws_credentials``:
in Lambda the execution role's session from the environment, exactly what botocore's own
environment provider would read) and is cached under them: the sandbox runs several functions
in one process, each as its own role, and a client built for one must never sign for another.
"""

from __future__ import annotations

import threading
from datetime import datetime
from typing import Any

import boto3
import botocore.session
from botocore.config import Config
from botocore.utils import parse_timestamp

from nodewright.settings import AwsCredentials, Settings

# Adaptive mode: retries with exponential backoff plus a client-side token bucket that slows
# the caller down when AWS throttles. 5 attempts: botocore's backoff waits up to 2, 4, 8 and 16 s
# between them, so a throttled call gives up within about 30 s, inside a 55 s invocation that
# must still report; 8 attempts (up to 90 s of backoff) let one CreateFleet outlive the function.
# ``total_max_attempts``, not ``max_attempts``, which counts the retries after the first (5 of
# them would make 6 attempts; tests/unit/test_cloud_retries.py counts them).
RETRY_CONFIG = Config(
    retries={"mode": "adaptive", "total_max_attempts": 5},
    user_agent_extra="nodewright",
    connect_timeout=5,
    read_timeout=30,
)

# The Pricing API has endpoints in a few regions only; us-east-1 serves every region's prices.
PRICING_API_REGION = "us-east-1"

DEFAULT_POOL_CONNECTIONS = 10  # botocore's max_pool_connections
_clients: dict[tuple[str, str, str | None, bool, AwsCredentials | None, int], Any] = {}
_session: boto3.session.Session | None = None  # one session: it caches the parsed service models
_lock = threading.Lock()


# For a caller that must answer within a second or two (the wake-up webhook, whose caller, the API
# server, waits at most 2 s): short timeouts, one retry.
QUICK_CONFIG = Config(
    retries={"mode": "standard", "total_max_attempts": 2},
    user_agent_extra="nodewright",
    connect_timeout=1,
    read_timeout=2,
)


def timestamp(value: Any) -> datetime:
    """botocore's timestamp parser, with ISO 8601 times (EC2's, e.g. an instance's ``LaunchTime``)
    read by ``datetime.fromisoformat`` instead of dateutil.

    botocore parses every timestamp of a response with dateutil (about 30 µs each; fromisoformat
    0.1 µs). A DescribeInstances of 5,000 instances carries about 30,000 of them (launch, ENI and
    volume attachment times), about a CPU second of each garbage-collection and drift pass over a
    big cluster, three on a 512 MB function. Anything else (epoch seconds, RFC 822 dates, an ISO
    time without an offset, whose zone botocore decides) goes to botocore's own parser, so every
    answer is the instant botocore gives (its zone object may differ: ``timezone.utc`` here,
    dateutil's UTC or local zone there; equal offsets, equal datetimes)."""
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            parsed = None
        if parsed is not None and parsed.tzinfo is not None:
            return parsed
    botocores: datetime = parse_timestamp(value)
    return botocores


def _new_session() -> boto3.session.Session:
    core = botocore.session.get_session()
    core.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=timestamp)
    return boto3.session.Session(botocore_session=core)


def client(service: str, settings: Settings, region: str | None = None, *, quick: bool = False) -> Any:
    """A cached botocore client for ``service`` configured from ``settings`` (``quick``: short
    timeouts and one retry, for callers that answer someone waiting)."""
    global _session  # noqa: PLW0603 - the per-container session, built on first use
    region_name = region or settings.region
    endpoint = settings.service_endpoints.get(service.replace("-", "_")) or settings.aws_endpoint_url
    credentials = settings.aws_credentials
    # A connection for each launch a pass has in flight (settings.launch_concurrency): botocore keeps
    # 10 by default and opens, then throws away, one more for each call beyond them.
    pool = max(DEFAULT_POOL_CONNECTIONS, settings.launch_concurrency)
    key = (service, region_name, endpoint, quick, credentials, pool)
    with _lock:  # a boto3 Session is not thread-safe: build clients under the lock
        cached = _clients.get(key)
        if cached is None:
            _session = _session or _new_session()
            signing = (
                {
                    "aws_access_key_id": credentials.access_key_id,
                    "aws_secret_access_key": credentials.secret_access_key,
                    "aws_session_token": credentials.session_token,
                }
                if credentials is not None
                else {}
            )
            cached = _session.client(
                service,
                region_name=region_name,
                endpoint_url=endpoint,
                config=(QUICK_CONFIG if quick else RETRY_CONFIG).merge(Config(max_pool_connections=pool)),
                **signing,
            )
            _clients[key] = cached
        return cached


def identity(settings: Settings) -> str | None:
    """Whose credentials ``settings`` sign with (the access key id; None: botocore's chain), for
    the per-container caches that hold answers only that identity may see."""
    return settings.aws_credentials.access_key_id if settings.aws_credentials else None


def reset_clients() -> None:
    """Forget cached clients (tests that switch endpoints or moto contexts)."""
    with _lock:
        _clients.clear()
