"""Fixtures shared by every test layer."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

from sandbox.shared_data import shared_data_dir

# `make test` (and CI) draws the same examples on every run, so a red run can be replayed and a
# green one does not depend on luck; `pytest --hypothesis-profile=explore` draws new ones to hunt
# for bugs (a failure prints the example, which then belongs in a test of its own).
settings.register_profile("repeatable", derandomize=True, print_blob=True)
settings.register_profile("explore", derandomize=False, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))

# No test may reach a real AWS endpoint or pick up a developer's credentials.
os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_SESSION_TOKEN", "testing")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ.setdefault("AWS_REGION", "us-east-1")
os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
os.environ.setdefault("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "NodewrightTest")
os.environ.setdefault("POWERTOOLS_DEV", "false")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The reference data folder; tests that need it skip with a clear message when absent."""
    path = shared_data_dir()
    if path is None:
        pytest.skip("../shared/data is absent: this case needs the reference data (real prices/events)")
    return path
