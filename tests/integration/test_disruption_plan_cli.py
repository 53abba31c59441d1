"""``nodewright plan --consolidate``: the disruption flow's consolidation choice over manifests, unwritten.

The issue-24 cases (PDBs, empty nodes under an ``Empty`` budget, leaving and starting destinations)
run twice: through ``plan --consolidate`` and through the disruption flow itself (two passes on the
shared fakes, the catalog ``plan`` uses), and the two answers must be equal.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from nodewright.cli import main

from sandbox.scenarios.workloads import local_volume

ZONE = "us-west-2a"


def cluster(tmp_path: Path, *, budget: str | None = None, do_not_disrupt: str = "") -> Path:
    """Two m5.xlarge NodeClaims of a WhenEmptyOrUnderutilized NodePool, each running one 500m pod."""
    disruption: dict[str, Any] = {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "1m"}
    if budget:
        disruption["budgets"] = [{"nodes": budget}]
    ref = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
    selector = [{"tags": {"karpenter.sh/discovery": "demo"}}]
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": "karpenter.k8s.aws/v1",
            "kind": "EC2NodeClass",
            "metadata": {"name": "default"},
            "spec": {
                "role": "NodeRole",
                "amiSelectorTerms": [{"alias": "al2023@latest"}],
                "subnetSelectorTerms": selector,
                "securityGroupSelectorTerms": selector,
            },
        },
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": "default"},
            "spec": {
                "template": {
                    "spec": {
                        "nodeClassRef": ref,
                        "requirements": [
                            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                            {
                                "key": "karpenter.k8s.aws/instance-category",
                                "operator": "In",
                                "values": ["c", "m"],
                            },
                        ],
                    }
                },
                "disruption": disruption,
            },
        },
    ]
    for index, name in enumerate(("a", "b"), start=1):
        instance = f"i-{index:017d}"
        labels = {
            "karpenter.sh/nodepool": "default",
            "node.kubernetes.io/instance-type": "m5.xlarge",
            "karpenter.sh/capacity-type": "on-demand",
            "topology.kubernetes.io/zone": ZONE,
            "kubernetes.io/arch": "amd64",
            "kubernetes.io/os": "linux",
        }
        conditions = [
            {"type": kind, "status": "True", "lastTransitionTime": "2026-12-01T10:00:00Z"}
            for kind in ("Launched", "Registered", "Initialized")
        ]
        annotations = {"karpenter.sh/do-not-disrupt": "true"} if name == do_not_disrupt else {}
        docs += [
            {
                "apiVersion": "karpenter.sh/v1",
                "kind": "NodeClaim",
                "metadata": {"name": f"default-{name}", "labels": labels},
                "spec": {"nodeClassRef": ref, "requirements": []},
                "status": {
                    "instanceID": instance,
                    "providerID": f"aws:///{ZONE}/{instance}",
                    "nodeName": f"node-{name}",
                    "conditions": conditions,
                },
            },
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": f"node-{name}",
                    "labels": {**labels, "kubernetes.io/hostname": f"node-{name}"},
                    "annotations": annotations,
                },
                "spec": {"providerID": f"aws:///{ZONE}/{instance}"},
                "status": {
                    "conditions": [{"type": "Ready", "status": "True"}],
                    "allocatable": {"cpu": "3920m", "memory": "14Gi", "pods": "58"},
                },
            },
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"web-{name}", "namespace": "default", "labels": {"app": "web"}},
                "spec": {
                    "nodeName": f"node-{name}",
                    "containers": [
                        {
                            "name": "app",
                            "image": "nginx",
                            "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}},
                        }
                    ],
                },
                "status": {"phase": "Running"},
            },
        ]
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump_all(docs))
    return tmp_path


def plan(path: Path, *extra: str) -> dict[str, Any]:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert (
            main(
                ["plan", "--manifests", str(path), "--region", "us-west-2", "--consolidate", "--json", *extra]
            )
            == 0
        )
    return json.loads(printed.getvalue())


def test_within_the_default_budget_one_node_whose_pod_fits_elsewhere_is_deleted(tmp_path: Path) -> None:
    result = plan(cluster(tmp_path))

    command = result["command"]
    assert (command["method"], command["action"]) == ("single", "delete")
    assert len(command["removes"]) == 1
    assert command["launches"] == []
    assert command["savingsPerHour"] == pytest.approx(command["removes"][0]["pricePerHour"])
    assert command["savingsPerHour"] > 0
    assert result["unpriced"] == []
    assert result["costPerHour"] == pytest.approx(2 * command["removes"][0]["pricePerHour"])


def test_with_room_in_the_budget_both_nodes_are_replaced_by_one_strictly_cheaper_node(tmp_path: Path) -> None:
    result = plan(cluster(tmp_path, budget="100%"))

    command = result["command"]
    # the many→several wave (disruption.repack) finds Karpenter's multi-node command first
    assert (command["method"], command["action"]) == ("repack", "replace")
    assert sorted(r["nodeClaim"] for r in command["removes"]) == ["default-a", "default-b"]
    [launch] = command["launches"]
    assert launch["worstPricePerHour"] == command["pricePerHourAfter"] < command["pricePerHourBefore"]
    assert "m5.xlarge" not in launch["instanceTypes"]


def test_a_do_not_disrupt_node_stays_and_the_plan_says_why_in_text_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = cluster(tmp_path, budget="100%", do_not_disrupt="b")

    result = plan(path)
    assert [r["nodeClaim"] for r in result["command"]["removes"]] == ["default-a"]
    assert "karpenter.sh/do-not-disrupt" in result["notConsolidated"]["default-b"]

    assert main(["plan", "--manifests", str(path), "--region", "us-west-2", "--consolidate"]) == 0
    text = capsys.readouterr().out
    assert "nothing is written" in text
    assert "removes NodeClaim default-a" in text
    assert 'default-b: Disruption is blocked through the "karpenter.sh/do-not-disrupt" annotation' in text


# --- the same answers as the flow (issue 24: 2, 4 and 5) ---------------------------------------------

REF = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
SELECTOR = [{"tags": {"karpenter.sh/discovery": "demo"}}]
ALLOCATABLE = {
    "m5.large": {"cpu": "1930m", "memory": "6903Mi", "pods": "29"},
    "m5.xlarge": {"cpu": "3920m", "memory": "14Gi", "pods": "58"},
    "m5.2xlarge": {"cpu": "7910m", "memory": "29317Mi", "pods": "58"},
}


def node_docs(
    name: str,
    instance_type: str,
    pods: dict[str, str],
    *,
    deleting: bool = False,
    initialized: bool = True,
    daemon: bool = False,
    pinned: bool | str = False,
    capacity_type: str = "on-demand",
    without: tuple[str, ...] = (),
    claim: str = "",
) -> list[dict[str, Any]]:
    """A NodeClaim, its Node and its pods (name → CPU request). ``pinned``: its pods carry
    do-not-disrupt (``True``: "true"; a string: that duration; the node stays and is only a
    destination); ``daemon``: they are DaemonSet pods; ``without``: labels the NodeClaim and Node
    lack; ``claim``: each pod mounts this PersistentVolumeClaim."""
    instance = f"i-{abs(hash(name)) % 10**17:017d}"
    labels = {
        "karpenter.sh/nodepool": "default",
        "node.kubernetes.io/instance-type": instance_type,
        "karpenter.sh/capacity-type": capacity_type,
        "topology.kubernetes.io/zone": ZONE,
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux",
    }
    labels = {k: v for k, v in labels.items() if k not in without}
    kinds = ("Launched", "Registered", "Initialized") if initialized else ("Launched", "Registered")
    claim_meta: dict[str, Any] = {"name": name, "labels": labels, "finalizers": ["karpenter.sh/termination"]}
    if deleting:
        claim_meta["deletionTimestamp"] = "2026-12-01T11:59:00Z"
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "metadata": claim_meta,
            "spec": {"nodeClassRef": REF, "requirements": []},
            "status": {
                "instanceID": instance,
                "providerID": f"aws:///{ZONE}/{instance}",
                "nodeName": f"node-{name}",
                "allocatable": ALLOCATABLE[instance_type],
                "conditions": [
                    {"type": kind, "status": "True", "lastTransitionTime": "2026-12-01T10:00:00Z"}
                    for kind in kinds
                ],
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": f"node-{name}",
                "labels": {**labels, "kubernetes.io/hostname": f"node-{name}"},
            },
            "spec": {"providerID": f"aws:///{ZONE}/{instance}"},
            "status": {
                "conditions": [{"type": "Ready", "status": "True"}],
                "allocatable": ALLOCATABLE[instance_type],
            },
        },
    ]
    for pod, cpu in pods.items():
        meta: dict[str, Any] = {"name": pod, "namespace": "default", "labels": {"app": pod}}
        if pinned:
            meta["annotations"] = {"karpenter.sh/do-not-disrupt": "true" if pinned is True else pinned}
        if daemon:
            meta["ownerReferences"] = [
                {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "ds"}
            ]
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": meta,
                "spec": {
                    "nodeName": f"node-{name}",
                    **(
                        {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]}
                        if claim
                        else {}
                    ),
                    "containers": [
                        {
                            "name": "app",
                            "image": "nginx",
                            "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}},
                        }
                    ],
                },
                "status": {
                    "phase": "Running",
                    "startTime": "2026-12-01T10:00:00Z",
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            }
        )
    return docs


def pdb_doc(name: str, app: str, status: dict[str, Any] | None, **spec: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "default", "generation": 1},
        "spec": {**spec, "selector": {"matchLabels": {"app": app}}},
    }
    if status is not None:
        doc["status"] = {"observedGeneration": 1, **status}
    return doc


def pool_docs(
    budgets: list[dict[str, Any]],
    *,
    policy: str = "WhenEmptyOrUnderutilized",
    capacity: tuple[str, ...] = ("on-demand",),
    requirements: tuple[dict[str, Any], ...] = (),
) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "karpenter.k8s.aws/v1",
            "kind": "EC2NodeClass",
            "metadata": {"name": "default"},
            "spec": {
                "role": "NodeRole",
                "amiSelectorTerms": [{"alias": "al2023@latest"}],
                "subnetSelectorTerms": SELECTOR,
                "securityGroupSelectorTerms": SELECTOR,
            },
        },
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": "default"},
            "spec": {
                "template": {
                    "spec": {
                        "nodeClassRef": REF,
                        "requirements": [
                            *(
                                [
                                    {
                                        "key": "karpenter.sh/capacity-type",
                                        "operator": "In",
                                        "values": list(capacity),
                                    }
                                ]
                                if capacity
                                else []
                            ),
                            *requirements,
                        ],
                    }
                },
                "disruption": {
                    "consolidationPolicy": policy,
                    "consolidateAfter": "0s",
                    "budgets": budgets,
                },
            },
        },
    ]


AGENT = {"agent": "100m"}
INSTANCE_TYPES_MIN_3 = {
    "key": "node.kubernetes.io/instance-type",
    "operator": "In",
    "values": ["m5.large", "m5.xlarge", "m5.2xlarge"],
    "minValues": 3,
}
ALL = [{"nodes": "100%"}]
CASES: dict[str, list[dict[str, Any]]] = {
    "two-pdbs": [
        *pool_docs(ALL),
        *node_docs("a", "m5.xlarge", {"web-a": "500m"}),
        *node_docs("b", "m5.xlarge", {"web-b": "500m"}),
        pdb_doc("one", "web-b", {"disruptionsAllowed": 1}, maxUnavailable=1),
        pdb_doc("two", "web-b", {"disruptionsAllowed": 1}, maxUnavailable=1),
    ],
    "pdb-without-status": [
        *pool_docs(ALL),
        *node_docs("a", "m5.xlarge", {"web-a": "500m"}),
        *node_docs("b", "m5.xlarge", {"web-b": "500m"}),
        pdb_doc("fresh", "web-b", None, maxUnavailable=1),
    ],
    "empty-nodes-under-an-empty-budget": [
        *pool_docs([{"nodes": "0", "reasons": ["Empty"]}, {"nodes": "100%"}]),
        *node_docs("empty-1", "m5.xlarge", {"agent-1": "100m"}, daemon=True),
        *node_docs("empty-2", "m5.xlarge", {"agent-2": "100m"}, daemon=True),
        *node_docs("busy-1", "m5.xlarge", {"web-1": "500m"}),
        *node_docs("busy-2", "m5.xlarge", {"web-2": "500m"}),
    ],
    "leaving-destination": [
        *pool_docs(ALL),
        *node_docs("roomy", "m5.2xlarge", {}, deleting=True),
        *node_docs("anchor", "m5.xlarge", {"pinned": "3"}, pinned=True),
        *node_docs("small", "m5.large", {"web": "1"}),
    ],
    "starting-destination": [
        *pool_docs(ALL),
        *node_docs("roomy", "m5.2xlarge", {}, initialized=False),
        *node_docs("anchor", "m5.xlarge", {"pinned": "3"}, pinned=True),
        *node_docs("small", "m5.large", {"web": "1"}),
    ],
    # issue 28: what the plan answered differently from the flow (or from Karpenter)
    "pdb-allowing-no-disruption": [
        *pool_docs(ALL),
        *node_docs("a", "m5.xlarge", {"web-a": "500m"}),
        *node_docs("b", "m5.xlarge", {"web-b": "500m"}),
        pdb_doc("held", "web-b", {"disruptionsAllowed": 0}, minAvailable=1),
    ],
    "a-lone-empty-node": [
        *pool_docs(ALL),
        *node_docs("idle", "m5.xlarge", AGENT, daemon=True),
    ],
    "an-empty-node-of-a-when-empty-pool": [
        *pool_docs(ALL, policy="WhenEmpty"),
        *node_docs("idle", "m5.xlarge", AGENT, daemon=True),
        *node_docs("busy", "m5.xlarge", {"web": "500m"}),
    ],
    "no-capacity-type-label": [
        *pool_docs(ALL, capacity=()),
        *node_docs("unlabelled", "m5.xlarge", {"web-a": "500m"}, without=("karpenter.sh/capacity-type",)),
        *node_docs("anchor", "m5.xlarge", {"pinned": "500m"}, pinned=True),
    ],
    "no-instance-type-label": [
        *pool_docs(ALL),
        *node_docs(
            "unlabelled", "m5.xlarge", {"web-a": "500m"}, without=("node.kubernetes.io/instance-type",)
        ),
        *node_docs("anchor", "m5.xlarge", {"pinned": "500m"}, pinned=True),
    ],
    "do-not-disrupt-for-ten-years": [
        *pool_docs(ALL),
        *node_docs("a", "m5.xlarge", {"web-a": "500m"}),
        *node_docs("b", "m5.xlarge", {"web-b": "500m"}, pinned="87600h"),
    ],
    "a-local-volume": [
        *pool_docs(ALL),
        *node_docs("a", "m5.xlarge", {"web-a": "500m"}, claim="data"),
        *node_docs("anchor", "m5.xlarge", {"pinned": "500m"}, pinned=True),
        *local_volume("data", "node-a"),
    ],
    "a-replacement-below-min-values": [
        *pool_docs(ALL, requirements=(INSTANCE_TYPES_MIN_3,)),
        *node_docs("big", "m5.2xlarge", {"web": "500m"}),
    ],
    "pods-of-a-leaving-node": [
        *pool_docs(ALL),
        *node_docs("leaving", "m5.xlarge", {"moving": "1500m"}, deleting=True),
        *node_docs("anchor", "m5.xlarge", {"pinned": "2"}, pinned=True),
        *node_docs("small", "m5.large", {"web": "1"}),
    ],
}
# What each case must answer (both ways): the command (method, action, NodeClaims) or None, and a
# phrase of the reason each named NodeClaim stays.
EXPECTED: dict[str, tuple[tuple[str, str, list[str]] | None, dict[str, str]]] = {
    # b stays; a goes, its pod moving to b
    "two-pdbs": (("single", "delete", ["a"]), {"b": "covered by 2 PDBs (default/one, default/two)"}),
    "pdb-without-status": (
        ("single", "delete", ["a"]),
        {"b": "PDB default/fresh has no status for its spec yet"},
    ),
    # the busy nodes only, in one wave; the empty ones wait for their Empty budget
    "empty-nodes-under-an-empty-budget": (("repack", "delete", ["busy-1", "busy-2"]), {}),
    # the leaving node's room is no destination: small's pod needs a (cheaper) new node
    "leaving-destination": (("single", "replace", ["small"]), {}),
    "starting-destination": (None, {"small": "would schedule against uninitialized nodeclaim/roomy"}),
    # the anchor's room is the moving pod's: small's pod needs a (cheaper) new node
    "pods-of-a-leaving-node": (("single", "replace", ["small"]), {}),
    "pdb-allowing-no-disruption": (
        ("single", "delete", ["a"]),
        {"b": "PDB default/held blocks eviction of pod default/web-b"},
    ),
    "a-lone-empty-node": (("removes", [("idle", "Empty")]), {}),
    "an-empty-node-of-a-when-empty-pool": (
        ("removes", [("idle", "Empty")]),
        {"busy": "consolidates only empty nodes"},
    ),
    # Karpenter prices a candidate by its offering (instance type, capacity type, zone): none, none
    "no-capacity-type-label": (None, {"unlabelled": 'has no "karpenter.sh/capacity-type" label'}),
    "no-instance-type-label": (None, {"unlabelled": "has no price"}),
    "do-not-disrupt-for-ten-years": (
        ("single", "delete", ["a"]),
        {"b": 'Pod has "karpenter.sh/do-not-disrupt" annotation (Pod=default/web-b)'},
    ),
    # its pod's volume lives on node-a: it cannot move
    "a-local-volume": (
        None,
        {"a": "no instance type in NodePool default matches kubernetes.io/hostname In [node-a]"},
    ),
    # the cheaper types are 2 of the 3 the NodePool's minValues asks for
    "a-replacement-below-min-values": (
        None,
        {"big": "minValues requirement is not met for node.kubernetes.io/instance-type"},
    ),
}


def plan_answer(tmp_path: Path, docs: list[dict[str, Any]]) -> tuple[Any, dict[str, str]]:
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump_all(docs))
    result = plan(tmp_path)
    command = result["command"]
    answer: Any = None
    if result["disrupted"]:
        answer = ("removes", sorted((d["nodeClaim"], d["reason"]) for d in result["disrupted"]))
    elif command is not None:
        answer = (command["method"], command["action"], sorted(r["nodeClaim"] for r in command["removes"]))
    return answer, result["notConsolidated"]


@functools.cache
def _offline_types(nodeclass: str) -> tuple[Any, ...]:
    """The plan's offline catalog for a NodeClass (as JSON), built once per process rather than once
    a case (0.2-0.5 s each): the product never changes an InstanceType it was given (overlays copy)."""
    from nodewright.cli.plan import offline_instance_types

    return tuple(offline_instance_types("us-west-2", None, False)(json.loads(nodeclass)))


def flow_answer(docs: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> tuple[Any, dict[str, str]]:
    """Two disruption passes 15 s apart (the validation) over the same objects, on the shared fakes
    with the catalog and prices ``plan`` uses."""
    from fakes import FakeClock, FakeCloudProvider, FakeCluster, FakeLease, fake_context
    from nodewright.cloud.ebs import node_storage
    from nodewright.disruption import consolidation, drift, flow
    from nodewright.state.world import observe

    clock = FakeClock()
    cluster, cloud = FakeCluster(clock), FakeCloudProvider(clock)
    volumes = {"PersistentVolume": [], "PersistentVolumeClaim": [], "StorageClass": []}
    for doc in docs:
        if doc["kind"] in volumes:  # the shared fake holds no volumes: its list calls answer these
            volumes[doc["kind"]].append(doc)
        else:
            cluster.add(doc["kind"], doc)
    monkeypatch.setattr(cluster, "list_persistent_volumes", lambda: volumes["PersistentVolume"])
    monkeypatch.setattr(cluster, "list_persistent_volume_claims", lambda: volumes["PersistentVolumeClaim"])
    monkeypatch.setattr(cluster, "list_storage_classes", lambda: volumes["StorageClass"])
    nodeclass = next(d for d in docs if d["kind"] == "EC2NodeClass")
    cloud.types = list(_offline_types(json.dumps(nodeclass, sort_keys=True)))
    monkeypatch.setattr(cloud, "node_price", lambda nc: node_storage(nc, "us-west-2").per_hour)
    ctx = fake_context(cluster, cloud, clock)
    flow.forget_proposals()
    drift.forget_dynamic()
    monkeypatch.setattr(flow, "_recent_why_not", {})
    reports = []
    for _ in range(2):
        reports.append(flow.reconcile(ctx, observe(ctx), lease=FakeLease()))
        clock.advance(consolidation.VALIDATION_SECONDS)
    decisions = [d for report in reports for d in report.decisions]
    assert len(decisions) <= 1, decisions
    answer: Any = (
        (decisions[0].method, decisions[0].action, sorted(decisions[0].nodeclaims)) if decisions else None
    )
    if reports[0].disrupted:  # a pass that removes empty nodes stops there; the next one looks again
        answer = ("removes", sorted((d.nodeclaim, d.reason) for d in reports[0].disrupted))
    assert not any(r.drifted for r in reports), "nothing here has drifted"
    return answer, reports[-1].held


@pytest.mark.parametrize("case", sorted(CASES))
def test_plan_consolidate_answers_as_the_flow_does(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected_command, expected_why = EXPECTED[case]

    planned, plan_why = plan_answer(tmp_path, CASES[case])
    flowed, flow_why = flow_answer(CASES[case], monkeypatch)

    assert planned == flowed == expected_command
    for name, phrase in expected_why.items():
        assert phrase in plan_why.get(name, ""), plan_why
        if name in flow_why:  # the plan also says why where the flow is silent (a WhenEmpty pool's node)
            assert plan_why[name] == flow_why[name], (plan_why, flow_why)


def test_a_pdb_manifest_the_plan_cannot_read_is_reported_and_left_out(tmp_path: Path) -> None:
    broken = pdb_doc("broken", "web-b", {"disruptionsAllowed": 0}, maxUnavailable=0)
    broken["spec"]["selector"] = {"matchExpressions": [{"operator": "In"}]}
    docs = [*CASES["two-pdbs"][:-2], broken]
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump_all(docs))
    printed, errors = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(errors):
        status = main(
            ["plan", "--manifests", str(tmp_path), "--region", "us-west-2", "--consolidate", "--json"]
        )
    assert status == 1, "the plan covers what was valid; the exit status says not all was"
    assert "PodDisruptionBudget" in errors.getvalue()
    assert "spec.selector" in errors.getvalue()
    assert json.loads(printed.getvalue())["command"] is not None


def test_a_replacement_that_may_be_spot_is_priced_at_its_dearest_spot_offering_and_pinned_to_spot(
    tmp_path: Path,
) -> None:
    """Karpenter's worstLaunchPrice: an on-demand node whose NodePool allows spot is replaced by
    types whose dearest spot offering is cheaper than it, and the replacement launches only as spot
    (a spot shortage must not launch a dearer on-demand node instead)."""
    docs = [
        *pool_docs(ALL, capacity=("spot", "on-demand")),
        *node_docs("od", "m5.xlarge", {"web": "500m"}),
    ]
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump_all(docs))

    command = plan(tmp_path)["command"]

    assert (command["method"], command["action"]) == ("single", "replace")
    [launch] = command["launches"]
    assert launch["capacityTypes"] == ["spot"]
    assert {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]} in launch[
        "requirements"
    ]
    assert launch["worstPricePerHour"] < command["removes"][0]["pricePerHour"]


def test_spot_to_spot_replacements_are_proposed_only_with_the_stacks_gate_on(tmp_path: Path) -> None:
    """A spot node whose pod fits a cheaper spot node: held behind Karpenter's SpotToSpotConsolidation
    gate, as the deployed flow holds it, unless ``--spot-to-spot`` says the stack turned it on."""
    docs = [
        *pool_docs(ALL, capacity=("spot",)),
        *node_docs("big", "m5.2xlarge", {"web": "500m"}, capacity_type="spot"),
    ]
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump_all(docs))

    gated = plan(tmp_path)
    assert gated["command"] is None
    assert "SpotToSpotConsolidation is disabled" in gated["notConsolidated"]["big"]

    assert gated["featureGates"] == {"SpotToSpotConsolidation": False}
    enabled = plan(tmp_path, "--spot-to-spot")
    assert enabled["featureGates"] == {"SpotToSpotConsolidation": True}
    command = enabled["command"]
    assert (command["method"], command["action"]) == ("single", "replace")
    [launch] = command["launches"]
    assert launch["capacityTypes"] == ["spot"]
    assert len(launch["instanceTypes"]) >= 15, "spot-to-spot needs 15 cheaper types to choose from"
