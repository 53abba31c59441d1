"""Conformance with Karpenter's topology suite (kubernetes-sigs/karpenter
pkg/controllers/provisioning/scheduling/topology_test.go), translated to the scheduling core.

Each case names the Karpenter test it follows. Where this core does better than Karpenter's late
committal (it pins a planned pod's zone on its NodeClaim, so a pod that follows or avoids it can
be planned in the same pass), the case says so and checks the stronger outcome; the NodeClaim's
zone requirement is what makes kube-scheduler bind it there.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from nodewright.api import labels as wk
from nodewright.scheduling import Plan, Pod, Snapshot, plan
from test_scheduling_support import (
    ZONES,
    claim_of,
    node,
    nodepool,
    pods,
    requirements,
    spec,
    spread,
    term,
    zone_of,
)

ON_DEMAND = (wk.CAPACITY_TYPE, ("In", ["on-demand"]))
S2 = {"security": "s2"}
AFFINITY = "Topology > Pod Affinity/Anti-Affinity > "


@dataclass(frozen=True)
class Case:
    karpenter: str  # the Karpenter test this case follows
    snapshot: Callable[[], Snapshot]
    check: Callable[[Plan], bool | tuple[bool, ...]]  # every part must hold


def zones_of_pods(result: Plan, prefix: str = "") -> Counter[str | None]:
    """zone → number of new-claim pods (whose key starts with prefix) planned there."""
    found: Counter[str | None] = Counter()
    for pod, index in claim_of(result).items():
        if pod.startswith(f"default/{prefix}"):
            found[zone_of(result.new_claims[index])] += 1
    return found


def launch_zones(result: Plan, pod: str) -> set[str]:
    """The zones the claim holding the pod may launch in (its candidates' offerings)."""
    claim = result.new_claims[claim_of(result)[pod]]
    return {o.zone for c in claim.instance_types for o in c.offerings}


def pool_in(*zones: str, **kwargs: object):
    return nodepool(
        requirements=requirements(**{ON_DEMAND[0]: ON_DEMAND[1], wk.ZONE: ("In", list(zones))}), **kwargs
    )


def zone_spread(n: int, **fields: object) -> list[Pod]:
    return pods(n, spec(labels={"app": "z"}, spreads=(spread(wk.ZONE, app="z"),), **fields), "z")


def zone_pinned(zone: str, prefix: str, **fields: object) -> list[Pod]:
    return pods(1, spec(cpu=2000, node_selector=((wk.ZONE, zone),), **fields), prefix)


def repelling_nodes(zones: tuple[str, ...], weight: int = 0) -> list:
    """One full node per zone running a pod with zone anti-affinity to S2 (required, or preferred)."""
    anti = spec(affinity=(term(wk.ZONE, anti=True, weight=weight, **S2),))
    return [node(f"n-{z}", z, cpu=0, bound=[Pod("default", f"anti-{z}", anti, f"n-{z}")]) for z in zones]


def all_placed(result: Plan) -> bool:
    return not result.unschedulable


CASES: dict[str, Case] = {
    "zonal spread balances pods across zones": Case(
        "Topology > Zonal > should balance pods across zones (match labels)",
        lambda: Snapshot(zone_spread(4), [nodepool()]),
        lambda r: (all_placed(r), sorted(zones_of_pods(r).values()) == [1, 1, 2]),
    ),
    "zonal spread stays inside the NodePool's zones": Case(
        "Topology > Zonal > should respect NodePool zonal constraints",
        lambda: Snapshot(zone_spread(4), [pool_in(ZONES[0], ZONES[1])]),
        lambda r: (all_placed(r), zones_of_pods(r) == {ZONES[0]: 2, ZONES[1]: 2}),
    ),
    "zonal spread counts running pods and never exceeds maxSkew": Case(
        "Topology > Zonal > should not violate max-skew when unsat = do not schedule",
        lambda: Snapshot(
            zone_spread(3),
            [nodepool()],
            [
                node(
                    "a",
                    ZONES[0],
                    bound=[Pod("default", f"old-{i}", zone_spread(1)[0].spec, "a") for i in range(2)],
                )
            ],
        ),
        lambda r: (all_placed(r), zones_of_pods(r) == {ZONES[1]: 2, ZONES[2]: 1}),
    ),
    "a preferred zone does not narrow the spread's domains (2/2/2, not 3/3/0)": Case(
        "Topology > Zonal: domains come from the pod's strict requirements (NewStrictPodRequirements), "
        "so preferences cannot narrow them",
        lambda: Snapshot(
            zone_spread(6, preferred_terms=((10, requirements(**{wk.ZONE: ("In", [ZONES[0], ZONES[1]])})),)),
            [nodepool()],
        ),
        lambda r: (all_placed(r), zones_of_pods(r) == dict.fromkeys(ZONES, 2)),
    ),
    "a zone offered only by a NodePool at its limits still counts as a domain": Case(
        "Topology > Zonal: domains are discovered from every compatible NodePool (provisioner "
        "buildDomainGroups), limits aside",
        lambda: Snapshot(
            zone_spread(6),
            [
                pool_in(ZONES[0], ZONES[1], weight=10),
                nodepool(
                    "full",
                    limits={"cpu": 1000},
                    in_use={"cpu": 1000},
                    requirements=requirements(**{wk.ZONE: ("In", [ZONES[2]])}),
                ),
            ],
        ),
        lambda r: (
            zones_of_pods(r) == {ZONES[0]: 1, ZONES[1]: 1},
            len(r.unschedulable) == 4,
            all("maxSkew 1 reached" in v for v in r.unschedulable.values()),
        ),
    ),
    "capacity-type spread balances spot and on-demand": Case(
        "Topology > CapacityType > should balance pods across capacity types",
        lambda: Snapshot(
            pods(4, spec(labels={"app": "c"}, spreads=(spread(wk.CAPACITY_TYPE, app="c"),))),
            [nodepool(requirements=requirements())],
        ),
        lambda r: (
            all_placed(r),
            Counter(next(iter(c.requirements[wk.CAPACITY_TYPE].values)) for c in r.new_claims for _ in c.pods)
            == {"spot": 2, "on-demand": 2},
        ),
    ),
    "hostname spread puts one pod per node": Case(
        "Topology > Hostname > should balance pods across nodes",
        lambda: Snapshot(
            pods(4, spec(cpu=100, labels={"app": "h"}, spreads=(spread(wk.HOSTNAME, app="h"),))), [nodepool()]
        ),
        lambda r: (all_placed(r), [len(c.pods) for c in r.new_claims] == [1, 1, 1, 1]),
    ),
    "zone anti-affinity against pods in every zone stays pending": Case(
        AFFINITY + "should not violate pod anti-affinity on zone",
        lambda: Snapshot(
            [
                *(p for z in ZONES for p in zone_pinned(z, f"s2-{z}", labels=S2)),
                *pods(1, spec(affinity=(term(wk.ZONE, anti=True, **S2),)), "anti"),
            ],
            [nodepool()],
        ),
        lambda r: (
            set(r.unschedulable) == {"default/anti-0000"},
            "pod anti-affinity on topology.kubernetes.io/zone" in r.unschedulable["default/anti-0000"],
        ),
    ),
    "zone anti-affinity against a planned pod whose zone is not decided stays pending": Case(
        AFFINITY + "should not violate pod anti-affinity on zone (other schedules first)",
        lambda: Snapshot(
            [
                *pods(1, spec(cpu=2000, labels=S2), "s2"),
                *pods(1, spec(affinity=(term(wk.ZONE, anti=True, **S2),)), "anti"),
            ],
            [nodepool()],
        ),
        lambda r: (
            set(r.unschedulable) == {"default/anti-0000"},
            not any("default/anti-0000" in c.pods for c in r.new_claims),
        ),
    ),
    "running pods' zone anti-affinity repels an incoming pod (planned in this pass)": Case(
        AFFINITY + "should not violate pod anti-affinity on zone (inverse)",
        lambda: Snapshot(
            [
                *(
                    p
                    for z in ZONES
                    for p in zone_pinned(z, f"anti-{z}", affinity=(term(wk.ZONE, anti=True, **S2),))
                ),
                *pods(1, spec(labels=S2), "s2"),
            ],
            [nodepool()],
        ),
        lambda r: set(r.unschedulable) == {"default/s2-0000"},
    ),
    "existing pods' zone anti-affinity repels an incoming pod": Case(
        AFFINITY + "should not violate pod anti-affinity on zone (inverse w/existing nodes)",
        lambda: Snapshot(
            pods(1, spec(labels=S2), "s2"),
            [nodepool()],
            repelling_nodes(ZONES),
        ),
        lambda r: (
            set(r.unschedulable) == {"default/s2-0000"},
            "of running or planned pods" in r.unschedulable["default/s2-0000"],
        ),
    ),
    "existing pods' preferred zone anti-affinity does not repel": Case(
        AFFINITY + "should violate preferred pod anti-affinity on zone (inverse w/existing nodes)",
        lambda: Snapshot(
            pods(1, spec(labels=S2), "s2"),
            [nodepool()],
            repelling_nodes(ZONES, weight=10),
        ),
        all_placed,
    ),
    "existing pods' zone anti-affinity leaves the free zones open": Case(
        AFFINITY + "should not violate pod anti-affinity on zone (inverse w/existing nodes), "
        "with one zone free",
        lambda: Snapshot(
            pods(2, spec(labels=S2), "s2"),
            [nodepool()],
            repelling_nodes(ZONES[:2]),
        ),
        lambda r: (all_placed(r), set(zones_of_pods(r, "s2")) == {ZONES[2]}),
    ),
    "an anti-affine pod and its target both planned, in different zones": Case(
        AFFINITY + "should not violate pod anti-affinity on zone (Schrödinger); "
        "stronger here: the anti-affine pod's claim is pinned to a zone, so the other is planned "
        "in the same pass",
        lambda: Snapshot(
            [
                *pods(1, spec(cpu=2000, affinity=(term(wk.ZONE, anti=True, **S2),)), "anti"),
                *pods(1, spec(labels=S2), "s2"),
            ],
            [nodepool()],
        ),
        lambda r: (
            all_placed(r),
            None not in zones_of_pods(r, "anti"),
            not set(zones_of_pods(r, "anti")) & launch_zones(r, "default/s2-0000"),
        ),
    ),
    "self zone anti-affinity: one pod per zone, the rest pending": Case(
        AFFINITY + "should support pod anti-affinity with a zone topology; "
        "stronger here: all three zones in one pass",
        lambda: Snapshot(pods(4, spec(labels=S2, affinity=(term(wk.ZONE, anti=True, **S2),))), [nodepool()]),
        lambda r: (
            zones_of_pods(r) == dict.fromkeys(ZONES, 1),
            len(r.unschedulable) == 1,
        ),
    ),
    "zone affinity follows a planned pod whose zone is constrained": Case(
        AFFINITY + "should support pod affinity with zone topology (constrained target)",
        lambda: Snapshot(
            [
                *pods(
                    1,
                    spec(labels=S2, required_terms=(requirements(**{wk.ZONE: ("In", [ZONES[1]])}),)),
                    "target",
                ),
                *pods(10, spec(affinity=(term(wk.ZONE, **S2),)), "aff"),
            ],
            [nodepool()],
        ),
        lambda r: (all_placed(r), zones_of_pods(r) == {ZONES[1]: 11}),
    ),
    "zone affinity follows a planned pod whose zone is open, pinning both": Case(
        AFFINITY + "should support pod affinity with zone topology (unconstrained target); "
        "stronger here: the target's claim is pinned, so its followers are planned in the same pass",
        lambda: Snapshot(
            [*pods(1, spec(labels=S2), "target"), *pods(10, spec(affinity=(term(wk.ZONE, **S2),)), "aff")],
            [nodepool()],
        ),
        lambda r: (all_placed(r), len(zones_of_pods(r)) == 1 and None not in zones_of_pods(r)),
    ),
    "zone affinity to a pod that exists nowhere stays pending": Case(
        AFFINITY + "should not schedule pods with affinity to a non-existent pod",
        lambda: Snapshot(pods(10, spec(affinity=(term(wk.ZONE, **S2),))), [nodepool()]),
        lambda r: (
            len(r.unschedulable) == 10,
            all("no matching pod is running or planned" in v for v in r.unschedulable.values()),
        ),
    ),
}


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_topology_conformance(case: str) -> None:
    conformance = CASES[case]
    result = plan(conformance.snapshot())
    outcome = conformance.check(result)
    parts = outcome if isinstance(outcome, tuple) else (outcome,)
    assert all(parts), (parts, zones_of_pods(result), result.unschedulable)
