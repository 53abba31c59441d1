"""Powertools Logger, Metrics and Tracer, built once per container.

The Tracer pulls in aws-xray-sdk (~0.6 s of import), so it is only built when
tracing is switched on (``NODEWRIGHT_TRACING=true``); handlers use ``trace`` as a
decorator that is a no-op otherwise.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from typing import IO, Any, TypeVar, cast

from aws_lambda_powertools import Logger, Metrics

NAMESPACE = "Nodewright"
F = TypeVar("F", bound=Callable[..., Any])


class _CurrentStdout(io.TextIOBase):
    """Whatever ``sys.stdout`` is at write time.

    Powertools' handler keeps the stream it was given, and the cached Logger outlives any
    temporary stdout: ``contextlib.redirect_stdout`` (the benchmarks, ``nodewright demo``) and
    pytest's per-test capture, which closes its stream when the test ends. In Lambda
    ``sys.stdout`` never changes, so this is the same stream there.
    """

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        return sys.stdout.write(text)

    def flush(self) -> None:
        sys.stdout.flush()


@cache
def logger() -> Logger:
    stream = cast(IO[str], _CurrentStdout())  # a TextIOBase: what Powertools writes to
    return Logger(service=os.environ.get("POWERTOOLS_SERVICE_NAME", "nodewright"), stream=stream)


@contextmanager
def logger_level(level: str | int) -> Iterator[None]:
    """The shared Logger at ``level`` for a block, then as it was.

    For CLI commands whose own output is on stdout: the functions' JSON log lines would garble
    it. The level is given back because ``nodewright.cli.main`` also runs inside other processes
    (tests, the demo), whose logging it must not change.
    """
    previous = logger().log_level
    logger().setLevel(level)
    try:
        yield
    finally:
        logger().setLevel(previous)


@cache
def metrics() -> Metrics:
    return Metrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE", NAMESPACE))


def record_pass_completed(function: str) -> None:
    """The heartbeat of a scheduled function: one ``PassesCompleted`` per invocation that ran its
    passes to the end, whatever they found (idle or busy). The flows' own metrics appear only when
    there is something to count, so only this one tells "nothing to do" from "not running"; the
    heartbeat alarms treat its absence as failure (infra/capabilities/monitoring.py)."""
    from aws_lambda_powertools.metrics import MetricUnit, single_metric

    with single_metric(
        name="PassesCompleted", unit=MetricUnit.Count, value=1, namespace=metrics().namespace
    ) as metric:
        metric.add_dimension(name="Function", value=function)


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
    traced: F = tracer().capture_lambda_handler(handler)
    return traced
