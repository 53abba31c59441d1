"""Fixtures shared by every test layer."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sandbox.shared_data import shared_data_dir

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
