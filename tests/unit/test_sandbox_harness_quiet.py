"""``quiet_functions`` quiets the functions only while a demo or bench runs: a bench run inside a
test worker once left ``POWERTOOLS_METRICS_DISABLED`` set, and every later test in that worker that
reads a function's EMF line failed."""

from __future__ import annotations

import os

import pytest
from nodewright.observability import logger

from sandbox.harness import quiet_functions


def test_quiet_functions_puts_the_environment_and_log_level_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    monkeypatch.setenv("POWERTOOLS_LOG_LEVEL", "DEBUG")
    level = logger().level

    with quiet_functions():
        assert os.environ["POWERTOOLS_METRICS_DISABLED"] == "true"
        assert os.environ["POWERTOOLS_LOG_LEVEL"] == "WARNING"
        assert logger().getEffectiveLevel() == 30

    assert "POWERTOOLS_METRICS_DISABLED" not in os.environ
    assert os.environ["POWERTOOLS_LOG_LEVEL"] == "DEBUG"
    assert logger().level == level
