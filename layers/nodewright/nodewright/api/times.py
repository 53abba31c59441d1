"""Timestamps as the Kubernetes API writes them, one definition each: ``metav1.Time`` (RFC 3339,
second precision, UTC, ``Z``: every object's times, and what Nodewright writes where AWS or a
Kubernetes object expects a time), ``metav1.MicroTime`` (a Lease's times), and the reading of
either. Here, under ``api``, rather than in ``cluster.objects`` (which re-exports them), so the
models and the AWS side write the same format without importing the Kubernetes client."""

from __future__ import annotations

from datetime import UTC, datetime


def format_time(moment: datetime) -> str:
    """``metav1.Time`` of ``moment``: second precision, UTC, ``Z``."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_rfc3339() -> str:
    """``metav1.Time`` of now."""
    return format_time(datetime.now(UTC))


def now_micro() -> str:
    """``metav1.MicroTime`` of now (Lease renewTime/acquireTime)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(value: str | None) -> datetime | None:
    """An API timestamp (Time or MicroTime) as an aware datetime; None when absent or unreadable."""
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


__all__ = ["format_time", "now_micro", "now_rfc3339", "parse_time"]
