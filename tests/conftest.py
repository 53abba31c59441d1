"""Fixtures shared by every test layer."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import settings

from sandbox.shared_data import shared_data_dir

if TYPE_CHECKING:
    from nodewright.cloud.catalog import CatalogData

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


# How `make test` (pytest -n 4 --dist loadgroup --no-loadscope-reorder) spreads the suite over its
# workers, decided here for every test rather than by markers in each module:
# - one xdist group per test module: a module's tests share its module-scoped fixtures (a sandbox,
#   a moto server, a fault rig), which start once on one worker instead of once per worker that
#   happens to get one of its tests; unrelated modules never share a group, so no worker is handed
#   several of the long e2e modules as one block while the other idles;
# - every infra module in one group, "infra": they share the session's CDK synths (tests/infra);
# - the groups go out in this order, the longest first so that the short ones fill the end: infra
#   (the synths, cfn-lint and checkov), the e2e modules, the integration modules, the unit modules.
_RUN_ORDER = ("infra", "e2e", "integration", "unit")
_TESTS = Path(__file__).parent


def _module(item: pytest.Item) -> str:
    """The item's module, relative to tests/ ("e2e/test_chaos_run.py")."""
    path = item.path
    return path.relative_to(_TESTS).as_posix() if _TESTS in path.parents else path.as_posix()


def _folder(item: pytest.Item) -> str:
    module = _module(item)
    return module.split("/", 1)[0] if "/" in module and _TESTS in item.path.parents else ""


def _run_rank(item: pytest.Item) -> int:
    folder = _folder(item)
    return _RUN_ORDER.index(folder) if folder in _RUN_ORDER else len(_RUN_ORDER)


# tryfirst: xdist's worker names each item's group (its nodeid's @suffix) in its own hook of this name.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            group = "infra" if _folder(item) == "infra" else _module(item)
            item.add_marker(pytest.mark.xdist_group(group))
    items.sort(key=_run_rank)  # stable: each module's tests stay together and in their order


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The reference data folder; tests that need it skip with a clear message when absent."""
    path = shared_data_dir()
    if path is None:
        pytest.skip("../shared/data is absent: this case needs the reference data (real prices/events)")
    return path


@pytest.fixture(scope="session")
def moto_catalog() -> CatalogData:
    """moto's ~1,400 instance types (us-east-1), described once per test process through the
    production reader (one DescribeInstanceTypes takes 5-7 s, 25 s on a loaded machine). Here, not
    in the module that uses it: a session fixture imported into several modules is computed once per
    module; and not in a tests/integration/conftest.py, which would take the module name ``conftest``
    that the infra tests import their constants from."""
    import boto3
    from moto import mock_aws
    from nodewright.cloud.catalog import fetch_catalog

    with mock_aws():
        return fetch_catalog(boto3.client("ec2", region_name="us-east-1"))
