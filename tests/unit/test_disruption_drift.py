"""Drift: static (hashes), requirements and dynamic (the cloud provider), and the Drifted condition."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from fakes import FakeClock, FakeCloudProvider, FakeCluster, RecordingLogger, RecordingMetrics, instance
from nodewright.api import hashing
from nodewright.api.models import NodePool
from nodewright.context import Context
from nodewright.disruption import drift
from nodewright.settings import Settings
from nodewright.state.world import observe

NODEPOOL: dict[str, Any] = {
    "metadata": {"name": "default"},
    "spec": {
        "template": {
            "metadata": {"labels": {"team": "a"}},
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                    {
                        "key": "node.kubernetes.io/instance-type",
                        "operator": "In",
                        "values": ["m5.large", "m5.xlarge"],
                    },
                ],
            },
        }
    },
}
NODECLASS: dict[str, Any] = {
    "metadata": {"name": "default"},
    "spec": {
        "role": "KarpenterNodeRole",
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
        "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
    },
}


def claim(name: str = "default-a", **annotations: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "labels": {
                "karpenter.sh/nodepool": "default",
                "team": "a",
                "karpenter.sh/capacity-type": "on-demand",
                "node.kubernetes.io/instance-type": "m5.large",
            },
            "annotations": {**hashing.nodeclaim_annotations(NODEPOOL, NODECLASS), **annotations},
        },
        "spec": {"nodeClassRef": {"name": "default"}},
        "status": {
            "instanceID": "i-00000000000000001",
            "conditions": [
                {"type": "Launched", "status": "True", "lastTransitionTime": "2026-12-02T11:00:00Z"}
            ],
        },
    }


def edited(document: dict[str, Any], path: list[str], value: Any) -> dict[str, Any]:
    changed = copy.deepcopy(document)
    target = changed
    for key in path[:-1]:
        target = target.setdefault(key, {})
    target[path[-1]] = value
    return changed


def test_a_nodeclaim_made_from_the_nodepool_as_it_is_has_not_drifted() -> None:
    assert drift.static_reason(claim(), NODEPOOL, NODECLASS) is None
    assert drift.requirements_reason(claim(), NodePool.from_dict(NODEPOOL)) is None


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (["spec", "template", "metadata", "labels"], {"team": "b"}),
        (["spec", "template", "spec", "taints"], [{"key": "dedicated", "effect": "NoSchedule"}]),
        (["spec", "template", "spec", "expireAfter"], "24h"),
    ],
)
def test_a_template_edit_drifts_the_nodepool_s_nodeclaims(path: list[str], value: Any) -> None:
    assert drift.static_reason(claim(), edited(NODEPOOL, path, value), NODECLASS) == drift.NODEPOOL_DRIFTED


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (["spec", "weight"], 10),
        (["spec", "limits"], {"cpu": "100"}),
        (["spec", "disruption"], {"consolidationPolicy": "WhenEmpty"}),
        (["spec", "template", "spec", "expireAfter"], "720h"),  # the default, written out
    ],
)
def test_behavioural_fields_and_written_out_defaults_drift_nothing(path: list[str], value: Any) -> None:
    assert drift.static_reason(claim(), edited(NODEPOOL, path, value), NODECLASS) is None


def test_static_nodeclass_fields_drift_and_its_selectors_are_left_to_dynamic_drift() -> None:
    user_data = edited(NODECLASS, ["spec", "userData"], "echo hi")
    assert drift.static_reason(claim(), NODEPOOL, user_data) == "NodeClassDrift", "the AWS provider's name"
    new_ami = edited(NODECLASS, ["spec", "amiSelectorTerms"], [{"id": "ami-0123"}])
    assert drift.static_reason(claim(), NODEPOOL, new_ami) is None


def test_a_hash_of_another_version_is_adopted_not_drifted() -> None:
    karpenters = claim(**{hashing.NODEPOOL_HASH: "1234", hashing.NODEPOOL_HASH_VERSION: "v3"})
    assert drift.static_reason(karpenters, NODEPOOL, NODECLASS) is None
    assert drift.stale_hashes(karpenters, NODEPOOL, NODECLASS) == {
        hashing.NODEPOOL_HASH: hashing.nodepool_hash(NODEPOOL),
        hashing.NODEPOOL_HASH_VERSION: hashing.HASH_VERSION,
    }


def test_requirements_drift_when_the_labels_no_longer_fit_not_when_they_widen() -> None:
    narrowed = edited(
        NODEPOOL,
        ["spec", "template", "spec", "requirements"],
        [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.xlarge"]}],
    )
    widened = edited(
        NODEPOOL,
        ["spec", "template", "spec", "requirements"],
        [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large", "c5.large"]}],
    )
    missing = edited(
        NODEPOOL,
        ["spec", "template", "spec", "requirements"],
        [{"key": "example.com/tier", "operator": "In", "values": ["gold"]}],
    )
    assert drift.requirements_reason(claim(), NodePool.from_dict(narrowed)) == drift.REQUIREMENTS_DRIFTED
    assert drift.requirements_reason(claim(), NodePool.from_dict(widened)) is None
    assert drift.requirements_reason(claim(), NodePool.from_dict(missing)) == drift.REQUIREMENTS_DRIFTED


def test_a_nodeclaim_of_a_nodepool_with_custom_multi_valued_requirements_has_not_drifted_at_birth() -> None:
    """The seeds' default NodePool requires ``node.kubernetes.io/instance-type47 In [t3.large,
    t3a.large]`` (a custom key: the typo of a well-known one). Karpenter labels its NodeClaims with one
    of the values; a NodeClaim without the label was RequirementsDrifted as soon as it launched."""
    from nodewright.provisioning import nodeclaims

    requirements = [
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand", "spot"]},
        {"key": "node.kubernetes.io/instance-type47", "operator": "In", "values": ["t3.large", "t3a.large"]},
        {"key": "example.com/team", "operator": "Exists"},
    ]
    pool = edited(NODEPOOL, ["spec", "template", "spec", "requirements"], requirements)
    born = nodeclaims.build(
        name="default-a", nodepool=NodePool.from_dict(pool), requirements=requirements, requests={}
    )
    assert born["metadata"]["labels"]["node.kubernetes.io/instance-type47"] == "t3.large"
    # The well-known labels are written when the instance is launched (launch.record_launch).
    born["metadata"]["labels"].update({"karpenter.sh/capacity-type": "spot"})
    assert drift.requirements_reason(born, NodePool.from_dict(pool)) is None
    unlabelled = claim()
    assert drift.requirements_reason(unlabelled, NodePool.from_dict(pool)) == drift.REQUIREMENTS_DRIFTED


@pytest.fixture
def ctx() -> Context:
    clock = FakeClock()
    drift.forget_dynamic()
    return Context(
        settings=Settings(cluster_name="test", region="us-west-2"),
        cluster=FakeCluster(clock),  # type: ignore[arg-type]
        cloud=FakeCloudProvider(clock),  # type: ignore[arg-type]
        store=None,
        logger=RecordingLogger(),
        metrics=RecordingMetrics(),
        clock=clock,
    )


def test_mark_writes_the_drifted_condition_once_and_clears_it_when_drift_is_undone(ctx: Context) -> None:
    cluster, cloud = ctx.cluster, ctx.cloud
    assert isinstance(cluster, FakeCluster)
    assert isinstance(cloud, FakeCloudProvider)
    cluster.add("NodePool", NODEPOOL)
    cluster.add("EC2NodeClass", NODECLASS)
    cluster.add("NodeClaim", claim())
    cloud.instances["i-00000000000000001"] = instance(
        "i-00000000000000001", "m5.large", "us-west-2a", "on-demand", "default-a", launch_time=ctx.clock.now()
    )
    world = observe(ctx)
    assert drift.mark(ctx, world, world.nodepools) == {}

    cloud.images = {"ami-2"}  # a new AMI is selected
    drift.forget_dynamic()
    world = observe(ctx)
    assert drift.mark(ctx, world, world.nodepools) == {"default-a": "AMIDrift"}
    stored = cluster.objects["NodeClaim"]["default-a"]
    assert drift.drifted(stored) == "AMIDrift"
    [condition] = [c for c in stored["status"]["conditions"] if c["type"] == "Drifted"]
    assert (condition["status"], condition["reason"], condition["message"]) == (
        "True",
        "AMIDrift",
        "AMIDrift",
    )
    assert cluster.events == [], "Karpenter publishes no event when it marks a NodeClaim drifted"
    calls = len(cluster.calls)
    drift.mark(ctx, observe(ctx), world.nodepools)  # the same verdict writes nothing (cached dynamic)
    assert len(cluster.calls) == calls

    cloud.images = {"ami-1"}
    drift.forget_dynamic()
    world = observe(ctx)
    assert drift.mark(ctx, world, world.nodepools) == {}
    assert drift.drifted(cluster.objects["NodeClaim"]["default-a"]) is None


def test_dynamic_drift_is_looked_at_again_at_once_when_an_ec2nodeclass_is_edited(ctx: Context) -> None:
    """Within ``DYNAMIC_EVERY`` the verdict is the cached one, unless an EC2NodeClass's generation
    moved (a user's edit), as Karpenter's drift controller watches EC2NodeClasses."""
    cluster, cloud = ctx.cluster, ctx.cloud
    assert isinstance(cluster, FakeCluster)
    assert isinstance(cloud, FakeCloudProvider)
    cluster.add("NodePool", NODEPOOL)
    cluster.add("EC2NodeClass", {**NODECLASS, "metadata": {"name": "default", "generation": 1}})
    cluster.add("NodeClaim", claim())
    cloud.instances["i-00000000000000001"] = instance(
        "i-00000000000000001", "m5.large", "us-west-2a", "on-demand", "default-a", launch_time=ctx.clock.now()
    )
    world = observe(ctx)
    assert drift.mark(ctx, world, world.nodepools) == {}

    cloud.images = {"ami-2"}  # an AMI released behind the alias: seen when the minute is up
    world = observe(ctx)
    assert drift.mark(ctx, world, world.nodepools) == {}

    cluster.objects["EC2NodeClass"]["default"]["metadata"]["generation"] = 2  # the user's edit
    world = observe(ctx)
    assert drift.mark(ctx, world, world.nodepools) == {"default-a": "AMIDrift"}
