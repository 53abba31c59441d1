"""Fixtures shared by every test layer."""

from __future__ import annotations

import json
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


# How `make test` (pytest -n 6 --dist loadgroup --no-loadscope-reorder) spreads the suite over its
# workers, decided here for every test rather than by markers in each module:
# - one xdist group per test module: a module's tests share its module-scoped fixtures (a sandbox,
#   a moto server, a fault rig), which start once on one worker instead of once per worker that
#   happens to get one of its tests; unrelated modules never share a group;
# - every infra module in one group, "infra": they share the session's CDK synths (tests/infra);
# - an e2e module longer than CHUNK_SECONDS is cut into runs of consecutive tests of at most that
#   long, each its own group: a sandbox starts in 2 to 6 s, and one 6-minute module on one worker
#   was the suite's critical path;
# - the groups go out longest first (as a scheduler packs jobs: the short ones fill the end), by
#   the seconds each test took in a recorded run (tests/durations.json, written by
#   `pytest --record-durations`; a test not in it counts as short, as the file leaves out those
#   under half a second; with no file, each test counts at its folder's typical time).
# xdist hands each worker its next group while the last tests of its current one run, so the order
# matters most at the start: the long stories (mostly waits on the product's real clocks, the CPU
# part idle) begin at once, and the CPU-bound unit and integration modules fill the gaps and the end.
_TESTS = Path(__file__).parent
_DURATIONS = _TESTS / "durations.json"
CHUNK_SECONDS = 150.0
_TYPICAL_SECONDS = {"e2e": 30.0, "infra": 2.0, "integration": 0.5, "unit": 0.05}
_RECORDED_AT_LEAST = 0.5  # shorter tests are left out of the file: their folder's typical time does


def _module(item: pytest.Item) -> str:
    """The item's module, relative to tests/ ("e2e/test_chaos_run.py")."""
    path = item.path
    return path.relative_to(_TESTS).as_posix() if _TESTS in path.parents else path.as_posix()


def _folder(item: pytest.Item) -> str:
    module = _module(item)
    return module.split("/", 1)[0] if "/" in module and _TESTS in item.path.parents else ""


def _recorded_durations() -> dict[str, float]:
    try:
        recorded = json.loads(_DURATIONS.read_text())
    except (OSError, ValueError):
        return {}  # no record: every test at its folder's typical time, still in a fair order
    return {str(k): float(v) for k, v in recorded.get("seconds", {}).items()}


def _unrecorded(item: pytest.Item, recorded: dict[str, float]) -> float:
    """A test the record leaves out took less than _RECORDED_AT_LEAST, or is newer than the record
    (counted as short too: the next recording places it); with no record, its folder's typical time."""
    return _RECORDED_AT_LEAST / 2 if recorded else _TYPICAL_SECONDS.get(_folder(item), 1.0)


def _groups(items: list[pytest.Item], seconds: dict[str, float]) -> dict[str, list[pytest.Item]]:
    """Each item's xdist group, in collection order (see the comment above)."""
    by_module: dict[str, list[pytest.Item]] = {}
    for item in items:
        by_module.setdefault("infra" if _folder(item) == "infra" else _module(item), []).append(item)
    groups: dict[str, list[pytest.Item]] = {}
    for module, members in by_module.items():
        if not module.startswith("e2e/"):
            groups[module] = members
            continue
        chunk, total = 1, 0.0
        run: list[pytest.Item] = []
        for item in members:
            took = seconds[item.nodeid]
            if run and total + took > CHUNK_SECONDS:
                groups[f"{module}#{chunk}"] = run
                chunk, run, total = chunk + 1, [], 0.0
            run.append(item)
            total += took
        groups[module if chunk == 1 else f"{module}#{chunk}"] = run
    return groups


# tryfirst: xdist's worker names each item's group (its nodeid's @suffix) in its own hook of this name.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    recorded = _recorded_durations()
    seconds = {item.nodeid: recorded.get(item.nodeid, _unrecorded(item, recorded)) for item in items}
    marked = [item for item in items if item.get_closest_marker("xdist_group") is not None]  # theirs kept
    groups = _groups([item for item in items if item not in marked], seconds)
    for group, members in groups.items():
        for item in members:
            item.add_marker(pytest.mark.xdist_group(group))
    total = {group: sum(seconds[item.nodeid] for item in members) for group, members in groups.items()}
    order = sorted(groups, key=lambda group: -total[group])  # stable: ties keep collection order
    items[:] = [item for group in order for item in groups[group]] + marked


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--record-durations",
        action="store_true",
        help=f"write each test's seconds (setup, call, teardown) to {_DURATIONS.name}: it orders later runs",
    )


_took: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    nodeid = report.nodeid.rsplit("@", 1)[0] if "@" in report.nodeid else report.nodeid  # xdist's @group
    _took[nodeid] = _took.get(nodeid, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    if not config.getoption("--record-durations") or hasattr(config, "workerinput"):
        return  # recorded once, by the process that saw every worker's reports
    kept = {nodeid: round(took, 1) for nodeid, took in sorted(_took.items()) if took >= _RECORDED_AT_LEAST}
    note = "pytest --record-durations (make test's options): seconds per test, the shorter ones left out"
    _DURATIONS.write_text(json.dumps({"recordedBy": note, "seconds": kept}, indent=0) + "\n")


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
