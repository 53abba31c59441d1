"""The static-drift hashes: remembered per content, never per object (an edit is a new hash)."""

from __future__ import annotations

import copy
from typing import Any

from nodewright.api import hashing

NODEPOOL: dict[str, Any] = {
    "metadata": {"name": "default"},
    "spec": {
        "template": {
            "metadata": {"labels": {"team": "a"}},
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
            },
        }
    },
}


def test_a_nodepool_edited_in_place_hashes_as_it_is_now_and_back_again() -> None:
    pool = copy.deepcopy(NODEPOOL)
    before = hashing.nodepool_hash(pool)
    pool["spec"]["template"]["metadata"]["labels"]["team"] = "b"
    edited = hashing.nodepool_hash(pool)
    assert edited != before
    pool["spec"]["template"]["metadata"]["labels"]["team"] = "a"
    assert hashing.nodepool_hash(pool) == before
    # Key order is not content: the same template written in another order hashes the same.
    reordered = {"spec": {"template": dict(reversed(list(NODEPOOL["spec"]["template"].items())))}}
    assert hashing.nodepool_hash(reordered) == before


def test_a_nodeclass_and_a_nodepool_with_the_same_content_keep_their_own_hashes() -> None:
    spec = {"role": "KarpenterNodeRole", "tags": {"team": "a"}}
    as_nodeclass = hashing.nodeclass_hash({"spec": spec})
    as_template = hashing.nodepool_hash({"spec": {"template": spec}})
    assert as_nodeclass == hashing.nodeclass_hash({"spec": copy.deepcopy(spec)})
    assert as_template == hashing.nodepool_hash({"spec": {"template": copy.deepcopy(spec)}})


def test_a_typed_nodepool_hashes_as_the_nodepool_it_was_read_from() -> None:
    """A NodeClaim is annotated with the hash of the typed NodePool (``nodeclaims.build``) and drift
    compares it with the hash of the NodePool as stored: the two must agree for every template,
    defaults written or left out, or every new NodeClaim would be born drifted."""
    from nodewright.api.models import NodePool

    full_template = {
        "metadata": {"labels": {"team": "a"}, "annotations": {"example.com/owner": "b"}},
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [{"key": "example.com/x", "operator": "In", "values": ["1"], "minValues": 1}],
            "taints": [{"key": "gpu", "effect": "NoSchedule", "value": ""}],
            "startupTaints": [{"key": "init", "effect": "NoExecute"}],
            "expireAfter": "Never",
            "terminationGracePeriod": "1h",
        },
    }
    pools: list[dict[str, Any]] = [
        NODEPOOL,
        {"metadata": {"name": "bare"}},
        {"metadata": {"name": "ref-only"}, "spec": {"template": {"spec": {"nodeClassRef": {"name": "x"}}}}},
        {"metadata": {"name": "full"}, "spec": {"template": full_template, "weight": 10}},
        {
            "metadata": {"name": "defaults"},
            "spec": {"template": {"spec": {"expireAfter": "720h", "taints": []}}},
        },
    ]
    for pool in pools:
        assert hashing.nodepool_hash(NodePool.from_dict(copy.deepcopy(pool))) == hashing.nodepool_hash(pool)
    assert hashing.nodepool_hash(pools[1]) == hashing.nodepool_hash(pools[4])  # defaults: as left out
