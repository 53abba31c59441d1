"""A launch whose candidates a NodeOverlay priced, against the sandbox's EC2 (moto, whose instant fleets
choose as EC2 does: ``sandbox.aws.ec2_fleet_allocation``): EC2's ``lowest-price`` goes by its own list
prices and would ignore the overlay, so such a launch asks for ``prioritized`` with each override's
Priority the overlaid price, as Karpenter's fleet builder does."""

from __future__ import annotations

from typing import Any

import pytest
from nodewright.api import labels as wk
from nodewright.api.overlays import from_manifest
from nodewright.cloud.provider import CloudProvider
from nodewright.state.overlays import PoolFacts, resolve
from test_cloud_provider import Env, FleetSpy, env, nodeclass, request

from sandbox.aws import ec2_reservations

__all__ = ["env"]


@pytest.fixture
def ec2(env: Env) -> Env:
    ec2_reservations.install()  # the sandbox's EC2: fleets allocate by their strategy
    return env


def candidates(provider: CloudProvider) -> list[Any]:
    """r5.xlarge at half price (a Savings Plan overlay) before c5.xlarge, as the plan ranks them."""
    types = [t for t in provider.instance_types(nodeclass()) if t.name in ("c5.xlarge", "r5.xlarge")]
    savings = from_manifest(
        {
            "metadata": {"name": "r5-savings-plan"},
            "spec": {
                "requirements": [{"key": wk.INSTANCE_TYPE, "operator": "In", "values": ["r5.xlarge"]}],
                "priceAdjustment": "-50%",
            },
        }
    )
    overlaid = resolve([savings], {"default": PoolFacts({}, types)}).apply("default", types)
    return sorted(overlaid, key=lambda t: min(o.price for o in t.offerings))


def test_a_launch_priced_by_an_overlay_is_prioritized_by_those_prices(ec2: Env) -> None:
    provider = CloudProvider(ec2.settings)
    ranked = candidates(provider)
    assert [t.name for t in ranked] == ["r5.xlarge", "c5.xlarge"]
    spy = FleetSpy(provider.ec2)
    on_demand = frozenset({"on-demand"})

    result = provider.create(
        request("overlaid", instance_types=ranked, capacity_types=on_demand, prioritized=True)
    )

    assert result.instance_type == "r5.xlarge"
    params = spy.calls[-1]
    assert params["OnDemandOptions"] == {"AllocationStrategy": "prioritized"}
    overrides = [o for c in params["LaunchTemplateConfigs"] for o in c["Overrides"]]
    r5 = {o["Priority"] for o in overrides if o["InstanceType"] == "r5.xlarge"}
    c5 = {o["Priority"] for o in overrides if o["InstanceType"] == "c5.xlarge"}
    assert max(r5) < min(c5)


def test_without_the_overlay_annotation_ec2_chooses_by_its_own_list_price(ec2: Env) -> None:
    provider = CloudProvider(ec2.settings)
    spy = FleetSpy(provider.ec2)
    result = provider.create(
        request("plain", instance_types=candidates(provider), capacity_types=frozenset({"on-demand"}))
    )
    assert spy.calls[-1]["OnDemandOptions"] == {"AllocationStrategy": "lowest-price"}
    assert result.instance_type == "c5.xlarge"  # EC2 bills c5.xlarge less than r5.xlarge


def test_a_spot_launch_priced_by_an_overlay_asks_for_capacity_optimized_prioritized(ec2: Env) -> None:
    provider = CloudProvider(ec2.settings)
    spy = FleetSpy(provider.ec2)
    provider.create(
        request(
            "spot", instance_types=candidates(provider), capacity_types=frozenset({"spot"}), prioritized=True
        )
    )
    assert spy.calls[-1]["SpotOptions"] == {"AllocationStrategy": "capacity-optimized-prioritized"}
