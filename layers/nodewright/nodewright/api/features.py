"""Every user-facing field of Karpenter v1.14's NodePool, NodeClaim, EC2NodeClass and NodeOverlay, and whether
Nodewright acts on it: the one definition the feature table (docs/features.md), ``nodewright validate``'s
warnings and the ``FieldsNotActedOn`` status condition are all made from.

A field Nodewright does not act on is accepted (the CRDs carry Karpenter v1.14's whole schema) and
stored; it never disables its NodePool or EC2NodeClass. ``not_acted_on(doc)`` names the ones a
document sets, each with what happens instead, so a user moving from Karpenter sees at once which
of their settings are inert here.

The field list follows the CRDs of Karpenter v1.14 (aws/karpenter-provider-aws
``pkg/apis/crds/*.yaml``): ``api.schema`` builds ours from the same facts, and a unit test holds
every leaf of ``api.schema`` to a row here, so a field added to the schema without a verdict fails.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from nodewright.api.shapes import as_dict

# Condition on a NodePool or EC2NodeClass: True while it sets fields Nodewright does not act on
# (the message names them); informational, the object stays Ready.
FIELDS_NOT_ACTED_ON = "FieldsNotActedOn"
NOT_ACTED_ON_REASON = "NotActedOn"
ALL_ACTED_ON_REASON = "AllFieldsActedOn"

NODEPOOL = "NodePool"
NODECLAIM = "NodeClaim"
EC2NODECLASS = "EC2NodeClass"
NODEOVERLAY = "NodeOverlay"
NODE = "Node"  # the labels, annotations and taints Karpenter puts on a node (table rows only)


@dataclass(frozen=True)
class Feature:
    """One field (``path``: dots, ``[]`` for list items) of one kind; ``acted_on`` False with
    ``note`` saying what happens instead. ``when`` narrows a verdict to some values of the field
    (``Balanced`` of consolidationPolicy), ``what`` names those values in the table."""

    kind: str
    path: str
    acted_on: bool
    note: str = ""
    when: Callable[[Any], bool] | None = None
    what: str = ""

    @property
    def label(self) -> str:
        return f"{self.path} = {self.what}" if self.what else self.path


def _y(kind: str, path: str, note: str = "") -> Feature:
    return Feature(kind, path, True, note)


def _no(
    kind: str, path: str, note: str, when: Callable[[Any], bool] | None = None, what: str = ""
) -> Feature:
    return Feature(kind, path, False, note, when, what)


_POOL_TEMPLATE = "spec.template"
FEATURES: tuple[Feature, ...] = (
    # --- NodePool --------------------------------------------------------------------------------
    _y(
        NODEPOOL,
        f"{_POOL_TEMPLATE}.metadata.labels",
        "on the NodeClaim and the Node (kubernetes.io keys too)",
    ),
    _y(NODEPOOL, f"{_POOL_TEMPLATE}.metadata.annotations", "on the NodeClaim and copied to the Node"),
    _y(
        NODEPOOL,
        f"{_POOL_TEMPLATE}.spec.requirements",
        "In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte; well-known and custom keys",
    ),
    _y(NODEPOOL, f"{_POOL_TEMPLATE}.spec.requirements[].minValues"),
    _y(NODEPOOL, f"{_POOL_TEMPLATE}.spec.taints"),
    _y(NODEPOOL, f"{_POOL_TEMPLATE}.spec.startupTaints"),
    _y(NODEPOOL, f"{_POOL_TEMPLATE}.spec.nodeClassRef"),
    _y(NODEPOOL, f"{_POOL_TEMPLATE}.spec.expireAfter"),
    _y(NODEPOOL, f"{_POOL_TEMPLATE}.spec.terminationGracePeriod"),
    _y(
        NODEPOOL,
        "spec.disruption.consolidationPolicy",
        "WhenEmpty, WhenEmptyOrUnderutilized, Balanced (Karpenter v1.14's score of savings against "
        "disruption, k = 2)",
    ),
    _y(NODEPOOL, "spec.disruption.consolidateAfter"),
    _y(NODEPOOL, "spec.disruption.budgets", "nodes, schedule, duration, reasons"),
    _y(NODEPOOL, "spec.limits"),
    _y(NODEPOOL, "spec.weight"),
    _y(
        NODEPOOL,
        "spec.replicas",
        "static NodePools with -c staticCapacity=true (Karpenter's StaticCapacity gate, off by default): "
        "that many nodes whatever the pods, kubectl scale, limits.nodes; no pending pod, consolidation or "
        "emptiness touches them, drift replaces one for one",
    ),
    _y(NODEPOOL, "status.resources", "written every minute (the disruption function)"),
    _y(NODEPOOL, "status.nodes"),
    _y(NODEPOOL, "status.nodeClassObservedGeneration"),
    _y(NODEPOOL, "status.conditions", "Ready, NodeClassReady, ValidationSucceeded, FieldsNotActedOn"),
    # --- NodeClaim (written by Nodewright, or by Karpenter before an adoption) ------------------------
    _y(NODECLAIM, "spec.requirements", "Gte/Lte as Karpenter v1.9+ writes them"),
    _y(NODECLAIM, "spec.requirements[].minValues"),
    _y(NODECLAIM, "spec.resources.requests"),
    _y(NODECLAIM, "spec.taints"),
    _y(NODECLAIM, "spec.startupTaints"),
    _y(NODECLAIM, "spec.nodeClassRef"),
    _y(NODECLAIM, "spec.expireAfter"),
    _y(NODECLAIM, "spec.terminationGracePeriod"),
    _y(NODECLAIM, "status.providerID"),
    _y(NODECLAIM, "status.nodeName"),
    _y(NODECLAIM, "status.imageID"),
    _y(NODECLAIM, "status.instanceID", "Nodewright's own; a Karpenter NodeClaim is read by providerID"),
    _y(NODECLAIM, "status.capacity"),
    _y(NODECLAIM, "status.allocatable"),
    _y(NODECLAIM, "status.conditions", "Launched, Registered, Initialized, Ready, Drifted, Consolidatable"),
    _y(NODECLAIM, "status.lastPodEventTime"),
    # --- EC2NodeClass ----------------------------------------------------------------------------------
    _y(
        EC2NODECLASS,
        "spec.amiFamily",
        "AL2, AL2023, Bottlerocket, Windows2019/2022/2025 (PowerShell bootstrap, kubernetes.io/os=windows, "
        "x86_64 types, prices with the licence estimated), Custom",
    ),
    _y(
        EC2NODECLASS,
        "spec.amiSelectorTerms[].alias",
        "al2, al2023, bottlerocket; windows2019/2022/2025@latest (the public Windows Server Core parameter)",
    ),
    _y(EC2NODECLASS, "spec.amiSelectorTerms[].id"),
    _y(EC2NODECLASS, "spec.amiSelectorTerms[].name"),
    _y(EC2NODECLASS, "spec.amiSelectorTerms[].owner"),
    _y(EC2NODECLASS, "spec.amiSelectorTerms[].tags"),
    _y(EC2NODECLASS, "spec.amiSelectorTerms[].ssmParameter", "resolved with SSM GetParameter"),
    _y(EC2NODECLASS, "spec.subnetSelectorTerms", "id, tags"),
    _y(EC2NODECLASS, "spec.securityGroupSelectorTerms", "id, name, tags"),
    _y(
        EC2NODECLASS,
        "spec.capacityReservationSelectorTerms",
        "id, tags, ownerID, instanceMatchCriteria; ODCRs and Capacity Blocks, capacity type reserved",
    ),
    _y(EC2NODECLASS, "spec.associatePublicIPAddress"),
    _y(EC2NODECLASS, "spec.ipPrefixCount", "Ipv4PrefixCount of the primary interface"),
    _y(EC2NODECLASS, "spec.networkInterfaces", "interface and efa-only, per network card"),
    _y(EC2NODECLASS, "spec.connectionTracking", "on every ENA interface"),
    _y(EC2NODECLASS, "spec.placementGroupSelector", "Placement.GroupId of the launch template"),
    _y(EC2NODECLASS, "spec.cpuOptions.nestedVirtualization"),
    _y(EC2NODECLASS, "spec.enclaveOptions.enabled"),
    _y(EC2NODECLASS, "spec.role", "instance profile created for it"),
    _y(EC2NODECLASS, "spec.instanceProfile"),
    _y(EC2NODECLASS, "spec.userData"),
    _y(EC2NODECLASS, "spec.tags"),
    _y(
        EC2NODECLASS,
        "spec.blockDeviceMappings",
        "every EBS field, volumeInitializationRate included; the rootVolume (else the family's kubelet "
        "volume) is the nodes' ephemeral-storage",
    ),
    _y(
        EC2NODECLASS,
        "spec.instanceStorePolicy",
        "RAID0: built by the user data of AL2, AL2023 and Bottlerocket, the instance store counted as "
        "ephemeral-storage",
    ),
    _y(EC2NODECLASS, "spec.detailedMonitoring"),
    _y(EC2NODECLASS, "spec.metadataOptions"),
    _y(
        EC2NODECLASS,
        "spec.kubelet",
        "clusterDNS, maxPods, podsPerCore, systemReserved, kubeReserved, evictionHard, evictionSoft, "
        "evictionSoftGracePeriod, evictionMaxPodGracePeriod, imageGC*ThresholdPercent, cpuCFSQuota",
    ),
    _y(EC2NODECLASS, "spec.context", "CreateFleet Context"),
    _y(EC2NODECLASS, "status.subnets", "written every minute (the disruption function)"),
    _y(EC2NODECLASS, "status.securityGroups"),
    _y(EC2NODECLASS, "status.amis"),
    _y(EC2NODECLASS, "status.instanceProfile"),
    _y(EC2NODECLASS, "status.capacityReservations", "state expiring from 40 minutes before a block's end"),
    _y(
        EC2NODECLASS,
        "status.conditions",
        "Ready, AMIsReady, SubnetsReady, SecurityGroupsReady, InstanceProfileReady, ValidationSucceeded, "
        "FieldsNotActedOn",
    ),
    # --- NodeOverlay (karpenter.sh/v1alpha1; read with the stack's nodeOverlay gate, off by default) ---
    _y(
        NODEOVERLAY,
        "spec.requirements",
        "matched against each NodePool's instance types and offerings (labels, template labels, nodepool)",
    ),
    _y(NODEOVERLAY, "spec.price", "replaces the price of the offerings it selects"),
    _y(NODEOVERLAY, "spec.priceAdjustment", "+/-N or +/-N% of the offerings' price, never below 0"),
    _y(NODEOVERLAY, "spec.capacity", "extended resources added to capacity (hugepages less memory)"),
    _y(NODEOVERLAY, "spec.weight", "highest first; same weight: the later name, a conflict applies nowhere"),
    _y(NODEOVERLAY, "status.conditions", "Ready, ValidationSucceeded (RuntimeValidation, Conflict)"),
    # --- what Karpenter v1.14 puts on nodes beside the fields (table rows; no document sets them) ---
    _y(NODE, "labels.topology.k8s.aws/zone-id", "on every offering, NodeClaim and Node (from the subnets)"),
    _y(NODE, "labels.karpenter.k8s.aws/ec2nodeclass", "on every NodeClaim and Node; pods may select it"),
    _y(NODE, "labels.node.kubernetes.io/windows-build", "on Windows nodes, the build of their AMI family"),
    _y(NODE, "labels.karpenter.k8s.aws/instance-tenancy", "dedicated: launched as a Dedicated Instance"),
    _y(
        NODE,
        "labels.node-role.kubernetes.io/*",
        "kubernetes.io and k8s.io keys allowed (v1.9+), set at registration",
    ),
    _y(
        NODE, "labels.karpenter.sh/do-not-sync-taints", "set by the user data; registration leaves the taints"
    ),
    _y(NODE, "taints.karpenter.sh/unregistered", "registered with it (user data), lifted at registration"),
    _y(
        NODE,
        "labels.karpenter.k8s.aws/capacity-reservation-*",
        "id, type (default, capacity-block), interruptible, on every node launched into a reservation; "
        "an interruptible reservation is launched into by a reserved-capacity fleet",
    ),
)

# What a static NodePool's FieldsNotActedOn says while the stack's staticCapacity setting is off.
STATIC_CAPACITY_OFF = (
    "spec.replicas",
    "the stack's staticCapacity setting is off (Karpenter v1.14's StaticCapacity feature gate, off by "
    "default): the NodePool launches no node; deploy with -c staticCapacity=true",
)

# Kubelet settings Nodewright renders (``api.schema.KUBELET``'s properties); any other field is kept
# and reported as not acted on (Karpenter v1.14 passes every upstream field through to user data).
KUBELET_NOTE = "not rendered into the node's user data (Karpenter v1.14 passes it through)"


def _values(value: Any, parts: list[str]) -> Iterator[Any]:
    """The values at a dotted path (``[]``: every item of a list)."""
    if not parts:
        yield value
        return
    head, rest = parts[0], parts[1:]
    if head.endswith("[]"):
        items = as_dict(value).get(head[:-2])
        for item in items if isinstance(items, list) else []:
            yield from _values(item, rest)
        return
    child = as_dict(value).get(head)
    if child is not None:
        yield from _values(child, rest)


def not_acted_on(doc: Any) -> list[tuple[str, str]]:
    """(field path, what happens instead) for every field ``doc`` sets that Nodewright does not act
    on; ``[]`` for a document that is not one of the three kinds."""
    kind = as_dict(doc).get("kind")
    found: list[tuple[str, str]] = []
    for feature in FEATURES:
        if feature.kind != kind or feature.acted_on:
            continue
        for value in _values(doc, feature.path.split(".")):
            if feature.when is None or feature.when(value):
                found.append((feature.label, feature.note))
                break
    if kind == EC2NODECLASS:
        from nodewright.api.schema import KUBELET

        kubelet = as_dict(as_dict(as_dict(doc).get("spec")).get("kubelet"))
        found.extend(
            (f"spec.kubelet.{key}", KUBELET_NOTE)
            for key in sorted(kubelet)
            if key not in KUBELET["properties"]
        )
    return found


def summary(fields: list[tuple[str, str]]) -> str:
    """One condition/event message: each field and what happens instead."""
    return "; ".join(f"{path}: not acted on ({note})" for path, note in fields)


def feature_table() -> str:
    """The table of docs/features.md: one row per field, ``y`` or ``not acted on`` with the note."""
    lines = ["| kind | field | Nodewright |", "|---|---|---|"]
    for feature in FEATURES:
        verdict = "y" if feature.acted_on else "not acted on"
        note = f" ({feature.note})" if feature.note else ""
        lines.append(f"| {feature.kind} | `{feature.label}` | {verdict}{note} |")
    lines.append(
        f"| EC2NodeClass | `spec.kubelet.<any other upstream field>` | not acted on ({KUBELET_NOTE}) |"
    )
    return "\n".join(lines) + "\n"
