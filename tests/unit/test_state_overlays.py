"""NodeOverlays resolved against NodePools' instance types (``state.overlays``), with Karpenter v1.14's
rules: requirement matching per type and offering, absolute prices and adjustments, extended
resources added to capacity, weight precedence, same-weight conflicts applied nowhere, and runtime
validation. Cases follow Karpenter's nodeoverlay suite and its NodeOverlays page."""

from __future__ import annotations

from typing import Any

import pytest
from nodewright.api import labels as wk
from nodewright.api.overlays import NodeOverlay, adjusted_price, by_precedence, from_manifest, runtime_errors
from nodewright.scheduling import Snapshot, plan
from nodewright.scheduling.resources import MIB
from nodewright.state.overlays import PoolFacts, resolve
from test_scheduling_support import catalog, nodepool, pods, spec


def overlay(name: str, *, weight: int = 0, requirements: Any = (), **spec_fields: Any) -> NodeOverlay:
    doc = {
        "apiVersion": "karpenter.sh/v1alpha1",
        "kind": "NodeOverlay",
        "metadata": {"name": name},
        "spec": {"requirements": list(requirements), **spec_fields, **({"weight": weight} if weight else {})},
    }
    return from_manifest(doc)


def on(key: str, *values: str, operator: str = "In") -> dict[str, Any]:
    return {"key": key, "operator": operator, "values": list(values)}


POOLS = {"default": PoolFacts({}, catalog())}


def prices(types: list[Any], name: str, capacity_type: str | None = None) -> set[float]:
    (found,) = [t for t in types if t.name == name]
    return {round(o.price, 6) for o in found.offerings if capacity_type in (None, o.capacity_type)}


def test_an_absolute_price_replaces_the_price_of_every_offering_of_the_selected_types() -> None:
    resolution = resolve(
        [overlay("ri", requirements=[on(wk.INSTANCE_TYPE, "m5.xlarge")], price="0.01")], POOLS
    )
    types = resolution.apply("default", catalog())
    assert prices(types, "m5.xlarge") == {0.01}
    assert prices(types, "m5.large") == {0.096, round(0.096 * 0.4, 4)}  # not selected: as EC2 priced it
    assert resolution.verdicts["ri"].ok


def test_an_adjustment_applies_only_to_the_offerings_its_requirements_select() -> None:
    spot_only = overlay("spot-discount", requirements=[on(wk.CAPACITY_TYPE, "spot")], priceAdjustment="-50%")
    types = resolve([spot_only], POOLS).apply("default", catalog())
    assert prices(types, "m5.large", "spot") == {round(0.0384 * 0.5, 6)}
    assert prices(types, "m5.large", "on-demand") == {0.096}


@pytest.mark.parametrize(
    ("price", "change", "expected"),
    [
        (1.0, "+10%", 1.1),
        (1.0, "-15%", 0.85),
        (1.0, "-100%", 0.0),
        (1.0, "+0.5", 1.5),
        (1.0, "-0.25", 0.75),
        (1.0, "-2", 0.0),  # never below zero
        (1.0, "3.5", 3.5),  # unsigned: the price itself
        (1.0, None, 1.0),
    ],
)
def test_karpenters_price_arithmetic(price: float, change: str | None, expected: float) -> None:
    assert adjusted_price(price, change) == pytest.approx(expected)


def test_the_higher_weight_sets_the_price_and_capacities_of_both_are_merged() -> None:
    """Karpenter's documented example: overlay-b (weight 10) -20% wins over overlay-a (weight 5)
    -10%; the capacity of both is added (hugepages-2Mi from a, custom-device/gpu from b)."""
    a = overlay(
        "overlay-a",
        weight=5,
        requirements=[on(wk.INSTANCE_TYPE, "m5.large")],
        priceAdjustment="-10%",
        capacity={"hugepages-2Mi": "50Mi"},
    )
    b = overlay(
        "overlay-b",
        weight=10,
        requirements=[on(wk.INSTANCE_TYPE, "m5.large")],
        priceAdjustment="-20%",
        capacity={"custom-device/gpu": "1"},
    )
    resolution = resolve([a, b], POOLS)
    (m5,) = [t for t in resolution.apply("default", catalog()) if t.name == "m5.large"]
    (original,) = [t for t in catalog() if t.name == "m5.large"]
    assert prices([m5], "m5.large", "on-demand") == {round(0.096 * 0.8, 6)}
    assert m5.capacity["custom-device/gpu"] == 1
    assert m5.allocatable["custom-device/gpu"] == 1
    assert m5.capacity["hugepages-2Mi"] == 50 * MIB
    # Hugepages are taken out of the memory pods can use, as Karpenter's allocatable does.
    assert m5.allocatable["memory"] == original.allocatable["memory"] - 50 * MIB
    assert resolution.verdicts["overlay-a"].ok
    assert resolution.verdicts["overlay-b"].ok
    assert resolution.applied("default", "m5.large").names == ["overlay-a", "overlay-b"]


def test_two_overlays_of_one_weight_on_the_same_offering_conflict_and_the_earlier_name_applies_nowhere() -> (
    None
):
    later = overlay("zz-savings-plan", requirements=[on(wk.INSTANCE_FAMILY, "m5")], priceAdjustment="-30%")
    earlier = overlay(
        "aa-negotiated",
        requirements=[on(wk.INSTANCE_CATEGORY, "m", "c")],  # also c5, which only it selects
        priceAdjustment="-50%",
    )
    resolution = resolve([earlier, later], POOLS)
    assert resolution.verdicts["zz-savings-plan"].ok
    verdict = resolution.verdicts["aa-negotiated"]
    assert (verdict.ok, verdict.reason, verdict.message) == (
        False,
        "Conflict",
        "conflict with another overlay",
    )
    types = resolution.apply("default", catalog())
    assert prices(types, "m5.large", "on-demand") == {round(0.096 * 0.7, 6)}
    assert prices(types, "c5.large", "on-demand") == {
        0.085
    }  # the conflicting overlay applies whole or not at all


def test_overlays_of_one_weight_on_different_resources_do_not_conflict() -> None:
    one = overlay(
        "fuse", requirements=[on(wk.INSTANCE_TYPE, "m5.large")], capacity={"smarter-devices/fuse": "1"}
    )
    two = overlay("price", requirements=[on(wk.INSTANCE_TYPE, "m5.large")], price="0.05")
    resolution = resolve([one, two], POOLS)
    assert resolution.verdicts["fuse"].ok
    assert resolution.verdicts["price"].ok


def test_precedence_is_weight_then_the_later_name() -> None:
    found = by_precedence([overlay("b"), overlay("c"), overlay("a", weight=3)])
    assert [o.name for o in found] == ["a", "c", "b"]


def test_a_requirement_on_a_label_the_type_does_not_have_selects_nothing_but_a_template_label_does() -> None:
    custom = overlay("team", requirements=[on("example.com/team", "ml")], price="0.001")
    pools = {"ml": PoolFacts({"example.com/team": "ml"}, catalog()), "web": PoolFacts({}, catalog())}
    resolution = resolve([custom], pools)
    assert prices(resolution.apply("ml", catalog()), "m5.large") == {0.001}
    assert prices(resolution.apply("web", catalog()), "m5.large", "on-demand") == {0.096}


def test_a_nodepool_requirement_scopes_an_overlay_to_that_nodepool() -> None:
    only_gpu = overlay("gpu-pool", requirements=[on(wk.NODEPOOL, "gpu")], priceAdjustment="+100%")
    pools = {"gpu": PoolFacts({}, catalog()), "default": PoolFacts({}, catalog())}
    resolution = resolve([only_gpu], pools)
    assert prices(resolution.apply("gpu", catalog()), "m5.large", "on-demand") == {0.192}
    assert prices(resolution.apply("default", catalog()), "m5.large", "on-demand") == {0.096}


def test_numeric_operators_gte_and_lt_select_by_instance_cpu() -> None:
    big = overlay("big", requirements=[on(wk.INSTANCE_CPU, "4", operator="Gte")], price="0.02")
    types = resolve([big], POOLS).apply("default", catalog())
    assert prices(types, "m5.xlarge") == {0.02}  # 4 vCPUs
    assert prices(types, "m5.large", "on-demand") == {0.096}  # 2 vCPUs


@pytest.mark.parametrize(
    ("requirement", "message"),
    [
        (on(wk.CAPACITY_TYPE, "preemptible"), "no valid values found"),
        (on("karpenter.sh/owner", "me"), "label karpenter.sh/owner is restricted"),
        (on(wk.HOSTNAME, "node-1"), "is restricted"),
        ({"key": wk.INSTANCE_CPU, "operator": "Gt", "values": ["many"]}, "single positive integer"),
    ],
)
def test_an_overlay_failing_runtime_validation_is_not_applied(
    requirement: dict[str, Any], message: str
) -> None:
    bad = overlay("bad", requirements=[requirement], price="0.001")
    resolution = resolve([bad], POOLS)
    verdict = resolution.verdicts["bad"]
    assert (verdict.ok, verdict.reason) == (False, "RuntimeValidation")
    assert message in verdict.message
    assert prices(resolution.apply("default", catalog()), "m5.large", "on-demand") == {0.096}


def test_offline_documents_are_checked_for_what_the_crd_would_refuse() -> None:
    both = overlay("both", price="1", priceAdjustment="+1%", capacity={"cpu": "2"})
    errors = runtime_errors(both)
    assert "cannot set both 'price' and 'priceAdjustment'" in errors
    assert any("capacity cpu: invalid resource restricted" in e for e in errors)


def test_an_extended_resource_only_an_overlay_declares_can_be_scheduled() -> None:
    """A pod requesting smarter-devices/fuse stays pending on the catalog as EC2 describes it; with
    an overlay adding it to m5 types, the plan places it on one."""
    fuse = spec(cpu=500, memory_mib=512, extra={"smarter-devices/fuse": 1})
    without = plan(Snapshot(pods(1, fuse), [nodepool()]))
    assert not without.new_claims
    assert without.unschedulable

    devices = overlay(
        "fuse", requirements=[on(wk.INSTANCE_FAMILY, "m5")], capacity={"smarter-devices/fuse": "2"}
    )
    overlaid = resolve([devices], POOLS).apply("default", catalog())
    result = plan(Snapshot(pods(1, fuse), [nodepool(instance_types=overlaid)]))
    (claim,) = result.new_claims
    assert {c.name for c in claim.instance_types} <= {"m5.large", "m5.xlarge", "m5.2xlarge"}
    assert not result.unschedulable


def test_an_overlay_changing_which_type_is_cheapest_changes_the_plan() -> None:
    """A Savings Plan on r5 makes r5.large the cheapest type that holds a 1-CPU pod (m6g.large was)."""
    one = spec(cpu=1000, memory_mib=1024)
    before = plan(Snapshot(pods(1, one), [nodepool(instance_types=catalog(spot=False))]))
    assert before.new_claims[0].instance_types[0].name == "m6g.large"
    savings = overlay("savings-plan", requirements=[on(wk.INSTANCE_FAMILY, "r5")], priceAdjustment="-60%")
    overlaid = resolve([savings], {"default": PoolFacts({}, catalog(spot=False))}).apply(
        "default", catalog(spot=False)
    )
    after = plan(Snapshot(pods(1, one), [nodepool(instance_types=overlaid)]))
    assert after.new_claims[0].instance_types[0].name == "r5.large"
