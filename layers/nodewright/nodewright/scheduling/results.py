"""What a plan decides: pods placed on existing capacity, NodeClaims to launch, reasons for the rest."""

from __future__ import annotations

from dataclasses import dataclass, field

from nodewright.scheduling.instancetypes import Offering
from nodewright.scheduling.model import Taint
from nodewright.scheduling.requirements import Requirements
from nodewright.scheduling.resources import Resources

# CreateFleet takes at most this many instance types per NodeClaim (Karpenter's MaxInstanceTypes):
# a claim carries its cheapest this many candidates.
MAX_CANDIDATE_TYPES = 60


@dataclass(frozen=True, slots=True)
class CandidateType:
    """An instance type a NodeClaim may launch as, with the offerings its requirements allow."""

    name: str
    price: float
    offerings: tuple[Offering, ...]


@dataclass(slots=True)
class NewClaim:
    nodepool: str
    requirements: Requirements
    pods: list[str]
    instance_types: list[CandidateType]
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    startup_taints: tuple[Taint, ...] = ()
    requests: Resources = field(default_factory=dict)
    volume_price: float = 0.0  # $/h of the node's EBS volumes, on top of the instance
    # A requirement's minValues was lowered to what the candidates offer (Snapshot.relax_min_values);
    # the NodeClaim says so in karpenter.sh/nodeclaim-min-values-relaxed.
    min_values_relaxed: bool = False

    def label_values(self) -> dict[str, list[str]]:
        """label → allowed values of its ``In`` requirements (the full form: ``requirements.to_k8s()``)."""
        return {
            key: sorted(r.values)
            for key, r in sorted(self.requirements.items())
            if not r.complement and r.values
        }

    @property
    def instance_price(self) -> float:
        """The cheapest candidate's price: what the launcher will most likely pay per hour."""
        return self.instance_types[0].price if self.instance_types else 0.0

    @property
    def price(self) -> float:
        """What the node costs per hour: its instance and its EBS volumes (what the plan minimises)."""
        return self.instance_price + self.volume_price if self.instance_types else 0.0


@dataclass(slots=True)
class Plan:
    placements: dict[str, str] = field(default_factory=dict)  # pod key → existing/in-flight node
    new_claims: list[NewClaim] = field(default_factory=list)
    unschedulable: dict[str, str] = field(default_factory=dict)  # pod key → reason
    classes: int = 0

    @property
    def cost_per_hour(self) -> float:
        return sum(claim.price for claim in self.new_claims)
