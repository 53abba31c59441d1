"""Which terminations a pass leaves to another container's driver (``termination.drivers``)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from fakes import T0, FakeClock, FakeCloudProvider, FakeCluster, fake_context
from nodewright.state.views import ClaimView
from nodewright.termination.drivers import DRIVER_ANNOTATION, Driver, holder_of
from nodewright.termination.terminate import in_progress


def deleting_claim(annotation: str | None) -> dict[str, Any]:
    annotations = {DRIVER_ANNOTATION: annotation} if annotation is not None else {}
    return {
        "metadata": {
            "name": "default-a",
            "deletionTimestamp": "2026-12-02T11:50:00Z",
            "finalizers": ["karpenter.sh/termination"],
            "annotations": annotations,
        },
        "status": {"providerID": "aws:///us-west-2a/i-1", "nodeName": "node-a"},
    }


def live(holder: str) -> str:
    return Driver(holder, T0 + timedelta(seconds=60)).annotation()


@pytest.mark.parametrize(
    ("annotation", "driver", "resumed"),
    [
        (None, None, True),  # nobody drives it: the provisioner's pass steps it
        (live("interruption/abc"), None, False),  # another container drives it
        (live("interruption/abc"), "interruption/abc", True),  # its own driver
        (live("interruption/abc"), "interruption/xyz", False),
        (Driver("interruption/abc", T0 - timedelta(seconds=1)).annotation(), None, True),  # expired
        ("interruption/abc soon", None, True),  # unreadable: must not freeze the termination
    ],
    ids=["unclaimed", "claimed-elsewhere", "own-claim", "other-driver", "expired", "malformed"],
)
def test_a_pass_leaves_a_termination_to_the_container_that_claimed_it(
    annotation: str | None, driver: str | None, resumed: bool
) -> None:
    clock = FakeClock()
    ctx = fake_context(FakeCluster(clock), FakeCloudProvider(clock), clock)

    found, deletions = in_progress(ctx, [], [ClaimView.of(deleting_claim(annotation))], driver=driver)

    assert [t.nodeclaim for t in found] == (["default-a"] if resumed else [])
    assert deletions == []


def test_a_claim_names_its_holder_until_it_expires() -> None:
    claim = deleting_claim(live("interruption/abc"))
    assert holder_of(claim, T0) == "interruption/abc"
    assert holder_of(claim, T0 + timedelta(seconds=61)) is None
