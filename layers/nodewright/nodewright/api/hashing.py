"""Static-drift hashes: what a NodeClaim was made from, so a later edit of its NodePool or EC2NodeClass
can be noticed (Karpenter's ``karpenter.sh/nodepool-hash`` and ``karpenter.k8s.aws/ec2nodeclass-hash``).

A NodeClaim is annotated, when it is created, with the hash of its NodePool's template and of its
EC2NodeClass's spec, and with the hash version. Drift compares those with the hashes of the objects as
they are now; a NodeClaim whose version differs (made by another release, or by Karpenter) is not
drifted by that: it is re-annotated with the current hashes, as Karpenter's hash controller does.

What is hashed follows Karpenter's split of fields:

* NodePool: ``spec.template`` (labels, annotations, taints, startup taints, nodeClassRef, expireAfter,
  terminationGracePeriod) **without** ``requirements`` (requirement drift compares them with the
  NodeClaim's labels instead, so widening a requirement drifts nothing) — the behavioural fields
  (``weight``, ``limits``, ``disruption``) are outside the template and never drift a node;
* EC2NodeClass: ``spec`` **without** the selector terms (subnets, security groups, AMIs, capacity
  reservations): those resolve to values in EC2 that dynamic drift compares with the instance.

Lists count as sets and empty values as absent (Karpenter hashes with ``SlicesAsSets`` and
``IgnoreZeroValue``); the v1 defaults are applied first, so writing a default out drifts nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nodewright.api.models import NodePool

NODEPOOL_HASH = "karpenter.sh/nodepool-hash"
NODEPOOL_HASH_VERSION = "karpenter.sh/nodepool-hash-version"
NODECLASS_HASH = "karpenter.k8s.aws/ec2nodeclass-hash"
NODECLASS_HASH_VERSION = "karpenter.k8s.aws/ec2nodeclass-hash-version"
# Our own, not Karpenter's "v3": the two hash functions differ, so a NodeClaim Karpenter annotated
# must be adopted (re-annotated), never taken for drifted.
HASH_VERSION = "nodewright-v1"

DYNAMIC_NODECLASS_FIELDS = frozenset(
    {
        "subnetSelectorTerms",
        "securityGroupSelectorTerms",
        "amiSelectorTerms",
        "capacityReservationSelectorTerms",
    }
)


def nodepool_hash(nodepool: Mapping[str, Any] | NodePool) -> str:
    """The hash of a NodePool's template, requirements left out (see the module): of the NodePool as
    stored, or of the typed ``api.models.NodePool`` read from it, which hash the same (the stored
    template is hashed as that model reads it)."""
    if isinstance(nodepool, Mapping):
        template = dict((nodepool.get("spec") or {}).get("template") or {})
    else:
        template = nodepool.spec.template.to_dict()
    return _remembered(("nodepool", template), _nodepool_hash)


def _nodepool_hash(template: dict[str, Any]) -> str:
    from nodewright.api.models import NodeClaimTemplate

    # An unreadable template is hashed as it is (validation refuses it anyway).
    with contextlib.suppress(TypeError, ValueError, AttributeError):
        template = NodeClaimTemplate.from_dict(template).to_dict()
    spec = {k: v for k, v in (template.get("spec") or {}).items() if k not in ("requirements", "resources")}
    return _digest({"metadata": template.get("metadata") or {}, "spec": spec})


def nodeclass_hash(nodeclass: Mapping[str, Any]) -> str:
    """The hash of an EC2NodeClass's static fields (selector terms left out; see the module)."""
    spec = dict(nodeclass.get("spec") or {})
    return _remembered(("nodeclass", spec), _nodeclass_hash)


def _nodeclass_hash(spec: dict[str, Any]) -> str:
    from nodewright.api.models import EC2NodeClassSpec

    with contextlib.suppress(TypeError, ValueError, AttributeError):
        spec = EC2NodeClassSpec.from_dict(spec).to_dict()
    return _digest({k: v for k, v in spec.items() if k not in DYNAMIC_NODECLASS_FIELDS})


def nodeclaim_annotations(
    nodepool: Mapping[str, Any] | NodePool, nodeclass: Mapping[str, Any] | None
) -> dict[str, str]:
    """The hash annotations a new NodeClaim carries (the EC2NodeClass's only when it is known)."""
    found = {NODEPOOL_HASH: nodepool_hash(nodepool), NODEPOOL_HASH_VERSION: HASH_VERSION}
    if nodeclass:
        found.update({NODECLASS_HASH: nodeclass_hash(nodeclass), NODECLASS_HASH_VERSION: HASH_VERSION})
    return found


# Hashes already worked out, by the JSON of what was hashed: a drift pass hashes the NodePool and
# the EC2NodeClass of every NodeClaim (5,000 NodeClaims of one NodePool: 5,000 times the same two
# objects, each read into the API models and written out again). Bounded: cleared when full.
_HASHES: dict[str, str] = {}
_HASHES_MAX = 256


def _remembered(what: tuple[str, dict[str, Any]], compute: Callable[[dict[str, Any]], str]) -> str:
    """``compute(value)``, remembered by the value's JSON (a value that has none is hashed as it is)."""
    kind, value = what
    try:
        key = kind + json.dumps(value, sort_keys=True)
    except (TypeError, ValueError):
        return compute(value)
    found = _HASHES.get(key)
    if found is None:
        if len(_HASHES) >= _HASHES_MAX:
            _HASHES.clear()
        found = _HASHES[key] = compute(value)
    return found


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(_canonical(value), sort_keys=True).encode()).hexdigest()[:16]


def _canonical(value: Any) -> Any:
    """Lists as sorted sets, empty values dropped, recursively."""
    if isinstance(value, Mapping):
        found = {str(k): _canonical(v) for k, v in value.items()}
        return {k: v for k, v in found.items() if v not in (None, "", [], {})}
    if isinstance(value, list | tuple):
        items = [_canonical(v) for v in value]
        return sorted(
            (i for i in items if i not in (None, "", [], {})), key=lambda i: json.dumps(i, sort_keys=True)
        )
    return value
