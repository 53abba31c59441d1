"""Conformance with Karpenter's scheduling suite (kubernetes-sigs/karpenter
pkg/controllers/provisioning/scheduling/suite_test.go): custom constraints with every operator,
well-known labels, preferences, taints, weights and minValues.

Each case names the Karpenter test it follows; the check is on the plan the core makes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
from nodewright.api import labels as wk
from nodewright.scheduling import Plan, Requirement, Snapshot, Taint, plan
from test_scheduling_support import nodepool, pods, requirements, spec, toleration

SUITE = "Scheduling > "
ON_DEMAND = {wk.CAPACITY_TYPE: ("In", ["on-demand"])}


@dataclass(frozen=True)
class Case:
    karpenter: str
    snapshot: Callable[[], Snapshot]
    scheduled: bool
    check: Callable[[Plan], bool] = lambda result: True


def team_pool(**extra: object):
    """A NodePool whose nodes carry team=a (a custom label)."""
    return nodepool(labels={"team": "a"}, **extra)


def required(**terms: tuple[str, list[str]]) -> list:
    return pods(1, spec(required_terms=(requirements(**terms),)))


def labels_of(result: Plan) -> dict[str, list[str]]:
    return result.new_claims[0].label_values()


CASES: dict[str, Case] = {
    "custom label In": Case(
        SUITE + "Custom Constraints > Well Known Labels > should use NodePool constraints (In)",
        lambda: Snapshot(required(team=("In", ["a"])), [team_pool()]),
        True,
        lambda r: labels_of(r)["team"] == ["a"],
    ),
    "custom label In with a value the NodePool lacks": Case(
        SUITE + "Custom Constraints > Node Affinity > should not schedule with incompatible requirement (In)",
        lambda: Snapshot(required(team=("In", ["b"])), [team_pool()]),
        False,
    ),
    "custom label NotIn": Case(
        SUITE
        + "Custom Constraints > Node Affinity > should schedule compatible requirements with Operator=NotIn",
        lambda: Snapshot(required(team=("NotIn", ["b"])), [team_pool()]),
        True,
    ),
    "custom label Exists": Case(
        SUITE
        + "Custom Constraints > Node Affinity > should schedule compatible requirements with Operator=Exists",
        lambda: Snapshot(required(team=("Exists", [])), [team_pool()]),
        True,
    ),
    "custom label DoesNotExist on a NodePool that sets it": Case(
        SUITE + "Custom Constraints > Node Affinity > should not schedule incompatible requirements with "
        "Operator=DoesNotExist",
        lambda: Snapshot(required(team=("DoesNotExist", [])), [team_pool()]),
        False,
    ),
    "custom label the NodePool does not define": Case(
        SUITE
        + "Custom Constraints > Node Selectors > should not schedule pods that have node selectors with "
        "undefined key",
        lambda: Snapshot(pods(1, spec(node_selector=(("team", "a"),))), [nodepool()]),
        False,
    ),
    "well-known label Gt": Case(
        SUITE
        + "Custom Constraints > Node Affinity > should schedule compatible requirements with Operator=Gt",
        lambda: Snapshot(required(**{wk.INSTANCE_CPU: ("Gt", ["3"])}), [nodepool()]),
        True,
        lambda r: all(c.name in {"m5.xlarge", "m5.2xlarge"} for c in r.new_claims[0].instance_types),
    ),
    "well-known label Lt": Case(
        SUITE
        + "Custom Constraints > Node Affinity > should schedule compatible requirements with Operator=Lt",
        lambda: Snapshot(required(**{wk.INSTANCE_CPU: ("Lt", ["4"])}), [nodepool()]),
        True,
        lambda r: all(c.name.endswith(".large") for c in r.new_claims[0].instance_types),
    ),
    "preferred node affinity relaxed when impossible": Case(
        SUITE + "Preferential Fallback > Preferences > should relax all node affinity terms",
        lambda: Snapshot(
            pods(1, spec(preferred_terms=((1, requirements(**{wk.ZONE: ("In", ["mars-1a"])})),))),
            [nodepool()],
        ),
        True,
    ),
    "required node affinity: the second OR term": Case(
        SUITE + "Preferential Fallback > Required > should relax multiple terms",
        lambda: Snapshot(
            pods(
                1,
                spec(
                    required_terms=(
                        requirements(**{wk.INSTANCE_TYPE: ("In", ["x9.huge"])}),
                        requirements(**{wk.INSTANCE_TYPE: ("In", ["m5.large"])}),
                    )
                ),
            ),
            [nodepool()],
        ),
        True,
        lambda r: [c.name for c in r.new_claims[0].instance_types] == ["m5.large"],
    ),
    "untolerated NodePool taint": Case(
        SUITE + "Taints > should not schedule pods that don't tolerate taints",
        lambda: Snapshot(pods(1, spec()), [nodepool(taints=(Taint("dedicated", "x"),))]),
        False,
    ),
    "tolerated NodePool taint": Case(
        SUITE + "Taints > should schedule pods that tolerate NodePool constraints",
        lambda: Snapshot(
            pods(1, spec(tolerations=(toleration("dedicated"),))),
            [nodepool(taints=(Taint("dedicated", "x"),))],
        ),
        True,
    ),
    "heavier NodePool first": Case(
        SUITE + "Weighted NodePools > should schedule to the nodepool with the highest priority always",
        lambda: Snapshot(pods(1, spec()), [nodepool("light", weight=1), nodepool("heavy", weight=50)]),
        True,
        lambda r: r.new_claims[0].nodepool == "heavy",
    ),
    "minValues met by the candidates": Case(
        SUITE + "MinValues > should schedule respecting the minValues from instance-type requirement",
        lambda: Snapshot(
            pods(1, spec()),
            [
                nodepool(
                    requirements=requirements(**ON_DEMAND).with_requirement(
                        Requirement.create(wk.INSTANCE_FAMILY, "Exists", (), 3)
                    )
                )
            ],
        ),
        True,
        lambda r: len({c.name.split(".")[0] for c in r.new_claims[0].instance_types}) >= 3,
    ),
}


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_scheduling_conformance(case: str) -> None:
    conformance = CASES[case]
    result = plan(conformance.snapshot())
    if conformance.scheduled:
        assert not result.unschedulable, result.unschedulable
        assert result.new_claims
        assert conformance.check(result), result
    else:
        assert len(result.unschedulable) == 1, result
        assert not result.new_claims
