"""Fixtures shared by every test layer."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import ModuleType

import pytest

from sandbox.shared_data import REPO_ROOT, shared_data_dir

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


def load_function(name: str) -> ModuleType:
    """Import ``functions/<name>/app.py`` as Lambda would, without putting functions/ on sys.path."""
    path = REPO_ROOT / "functions" / name / "app.py"
    spec = importlib.util.spec_from_file_location(f"nodewright_function_{name}", path)
    assert spec is not None, f"no handler at {path}"
    assert spec.loader is not None, f"no loader for {path}"
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
