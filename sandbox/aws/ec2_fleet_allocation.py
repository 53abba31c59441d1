"""Which override an instant fleet's on-demand capacity goes to, as EC2 chooses it.

moto 5.2 fills an instant fleet from its first override, whatever ``OnDemandOptions.AllocationStrategy``
says: kinder than EC2 to a caller whose override order disagrees with EC2's prices. EC2 ("On-Demand
allocation strategies", EC2 Fleet):

* ``lowest-price`` (the default): the override with the lowest On-Demand price first (ties: as given);
* ``prioritized``: each override's ``Priority``, the lowest number first; an override without one last.

The On-Demand price is what the sandbox's EC2 bills: the reference price when ``../shared/data``
has one, else the production estimate (``sandbox.aws.prices``'s rule; the state table the functions read
holds the same numbers). ``sandbox.aws.ec2_reservations`` orders a fleet's launch specs with
:func:`order` before placing them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cache
from typing import Any

LOWEST_PRICE = "lowest-price"
PRIORITIZED = "prioritized"


@cache
def on_demand_price(region: str, instance_type: str) -> float:
    """What the sandbox's EC2 bills an hour of ``instance_type`` on demand (inf: a type it does not know)."""
    from nodewright.cloud.pricetable import estimate_on_demand_price

    from sandbox.aws.catalog import bundled_catalog
    from sandbox.aws.prices import reference_on_demand

    known = reference_on_demand().get(instance_type)
    if known:
        return known
    info = bundled_catalog(region).types.get(instance_type)
    return estimate_on_demand_price(info) if info else math.inf


def order(specs: Sequence[Any], strategy: str | None, region: str) -> list[Any]:
    """moto's launch specs in the order EC2 tries them for on-demand capacity (see the module)."""
    if strategy == PRIORITIZED:
        return sorted(specs, key=lambda s: float((s.overrides or {}).get("Priority", math.inf)))
    return sorted(specs, key=lambda s: on_demand_price(region, s.instance_type))


__all__ = ["LOWEST_PRICE", "PRIORITIZED", "on_demand_price", "order"]
