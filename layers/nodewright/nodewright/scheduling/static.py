"""The NodeClaim a static NodePool launches, one per replica: no pods chose it, so it is its template
alone (Karpenter's ``NewNodeClaimTemplate``): the NodePool's requirements and labels, its taints, no
resource requests, and as candidates every instance type those requirements allow, cheapest first —
the launch takes the cheapest offering still available. Generic types are preferred to metal and
accelerator ones as for any NodeClaim, and ``minValues`` must hold among the candidates.
"""

from __future__ import annotations

from nodewright.api import labels as wk
from nodewright.scheduling.claims import min_values_short, prefer_generic
from nodewright.scheduling.model import NodePoolInput, Snapshot
from nodewright.scheduling.nodepools import NodePools
from nodewright.scheduling.requirements import Requirement
from nodewright.scheduling.results import MAX_CANDIDATE_TYPES, NewClaim


def static_claim(pool: NodePoolInput) -> tuple[NewClaim | None, str]:
    """The NodeClaim one more replica of ``pool`` is, or None and why no instance type can be one."""
    pools = NodePools(Snapshot(pods=[], nodepools=[pool]))
    requirements = pools.requirements[0]
    by_name = {t.name: t for t in pool.instance_types}
    found = [
        pools.candidate(instance_type, price, requirements)
        for instance_type, price in pools.types(0, requirements)[:MAX_CANDIDATE_TYPES]
    ]
    if not found:
        return None, f"NodePool {pool.name}: no instance type matches its requirements"
    found = prefer_generic(found, by_name)
    short = min_values_short(pool.name, requirements, found, by_name)
    if short:
        return None, short
    names = frozenset(c.name for c in found)
    return (
        NewClaim(
            pool.name,
            requirements.with_requirement(Requirement(wk.INSTANCE_TYPE, False, names)),
            [],
            found,
            {**pool.labels, wk.NODEPOOL: pool.name},
            pool.taints,
            pool.startup_taints,
            {},
            pool.node_price,
        ),
        "",
    )
