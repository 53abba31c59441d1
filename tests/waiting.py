"""The suite's one wait: poll a condition until it holds, never sleep for a guessed time."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

T = TypeVar("T")
# Every wait's timeout is multiplied by this: a timeout bounds a hang and asserts nothing, and the
# suite runs on a shared two-core machine (waits written for a quiet one timed out at a load average
# of 35). NODEWRIGHT_WAIT_PATIENCE=1 gives the written timeouts back, to find a slow wait.
PATIENCE = float(os.environ.get("NODEWRIGHT_WAIT_PATIENCE", "3"))


def wait_for(
    what: str,
    check: Callable[[], T],
    timeout: float = 90.0,
    step: Callable[[], Any] | None = None,
    every: float = 0.2,
) -> T:
    """Poll ``check`` (running ``step`` between looks, e.g. a handler's pass or a wait on a change
    event) until it returns something true, and return that; fail naming ``what`` after ``timeout``
    seconds times ``PATIENCE``. The timeout only bounds a hang, so it stretches with the machine's
    load rather than failing a slow but correct run."""
    patience = timeout * PATIENCE
    deadline = time.monotonic() + patience
    while not (found := check()):
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {patience:.0f}s waiting for {what}")
        if step is not None:
            step()
        if every > 0:
            time.sleep(every)
    return found
