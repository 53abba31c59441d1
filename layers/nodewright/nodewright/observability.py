"""Powertools Logger, Metrics and Tracer, built once per container.

The Tracer pulls in aws-xray-sdk (~0.6 s of import), so it is only built when
tracing is switched on (``NODEWRIGHT_TRACING=true``); handlers use ``trace`` as a
decorator that is a no-op otherwise.
"""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import cache
from typing import IO, Any, TypeVar, cast

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.base import SingleMetric
from aws_lambda_powertools.metrics.functions import is_metrics_disabled

NAMESPACE = "Nodewright"
F = TypeVar("F", bound=Callable[..., Any])
Key = TypeVar("Key", bound=tuple[str, ...])  # one value per dimension of a metric


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


def emit_metric(
    *, name: str, unit: MetricUnit, value: float, dimensions: Mapping[str, str], namespace: str | None = None
) -> None:
    """One metric with its own dimensions, as its own EMF document, written as one line in one write.

    Powertools' ``single_metric`` ``print``s its document: the text, then the newline, two writes.
    The interruption function handles a batch's messages in threads, whose log lines land between
    those two writes, and CloudWatch then reads one line holding two JSON documents: the metric and
    the log record are both lost (CI caught two glued together). Also unlike ``single_metric``
    (Powertools 3.37), ``POWERTOOLS_METRICS_DISABLED`` is honoured."""
    if is_metrics_disabled():
        return
    metric = SingleMetric(namespace=namespace or metrics().namespace)
    metric.add_metric(name=name, unit=unit, value=value)
    for key, dimension in dimensions.items():
        metric.add_dimension(name=key, value=dimension)
    line = json.dumps(metric.serialize_metric_set(), separators=(",", ":")) + "\n"
    sys.stdout.write(line)
    sys.stdout.flush()


def emit_counts(
    *,
    name: str,
    dimensions: tuple[str, ...],
    counts: Mapping[Key, int],
    namespace: str | None = None,
) -> None:
    """One ``Count`` of ``name`` per key of ``counts`` (the values of ``dimensions``, in that
    order), each by ``emit_metric``, in a stable order."""
    for values, count in sorted(counts.items()):
        emit_metric(
            name=name,
            unit=MetricUnit.Count,
            value=count,
            dimensions=dict(zip(dimensions, values, strict=True)),
            namespace=namespace,
        )


def record_pass_completed(function: str) -> None:
    """The heartbeat of a scheduled function: one ``PassesCompleted`` per invocation that ran its
    passes to the end, whatever they found (idle or busy). The flows' own metrics appear only when
    there is something to count, so only this one tells "nothing to do" from "not running"; the
    heartbeat alarms treat its absence as failure (infra/capabilities/monitoring.py)."""
    emit_metric(name="PassesCompleted", unit=MetricUnit.Count, value=1, dimensions={"Function": function})


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
