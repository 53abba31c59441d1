"""``quiet_functions`` quiets the functions only while a demo or bench runs: a bench run inside a
test worker once left ``POWERTOOLS_METRICS_DISABLED`` set, and every later test in that worker that
reads a function's EMF line failed."""

from __future__ import annotations

import os
import subprocess
import sys

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


def test_a_function_first_loaded_inside_the_quiet_block_logs_at_the_outer_level_after_it() -> None:
    """A fresh process whose first function is loaded inside the block (a storm bench's setup, run
    first in a test worker): its shared logger must not keep the quiet level for the worker's life."""
    code = (
        "import logging\n"
        "from sandbox.harness import quiet_functions\n"
        "from sandbox.runtime.lambdas import load_function\n"
        "with quiet_functions('ERROR'):\n"
        "    module = load_function('provisioner')\n"
        "    print(logging.getLevelName(module.log.getEffectiveLevel()))\n"
        "print(logging.getLevelName(module.log.getEffectiveLevel()))\n"
    )
    env = {**os.environ, "POWERTOOLS_LOG_LEVEL": "INFO", "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, check=False
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ERROR", "INFO"]
