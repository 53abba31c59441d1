"""Powertools Logger, Metrics and Tracer, built once per container.

The Tracer pulls in aws-xray-sdk (~0.6 s of import), so it is only built when
tracing is switched on (``NODEWRIGHT_TRACING=true``); handlers use ``trace`` as a
decorator that is a no-op otherwise.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import cache
from typing import Any, TypeVar

from aws_lambda_powertools import Logger, Metrics

NAMESPACE = "Nodewright"
F = TypeVar("F", bound=Callable[..., Any])


@cache
def logger() -> Logger:
    return Logger(service=os.environ.get("POWERTOOLS_SERVICE_NAME", "nodewright"))


@cache
def metrics() -> Metrics:
    return Metrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE", NAMESPACE))


def tracing_enabled() -> bool:
    return os.environ.get("NODEWRIGHT_TRACING", "false").lower() in ("1", "true", "yes")


@cache
def tracer() -> Any:
    from aws_lambda_powertools import Tracer  # lazy: ~0.6 s of import

    return Tracer(service=os.environ.get("POWERTOOLS_SERVICE_NAME", "nodewright"))


def trace(handler: F) -> F:
    """Wrap a Lambda handler with the Tracer only when tracing is on."""
    if not tracing_enabled():
        return handler
    return tracer().capture_lambda_handler(handler)
