"""The removal at ``cdk destroy`` against the API emulator: the webhooks taken out, the nodes drained
under their PDBs until the removal's deadline, everything released, and a second run resuming.

The emulator is bare (conftest.py): ``World`` plays the controllers, the FakeClock's ticks the
kubelet; EC2 is the FakeCloudProvider."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from nodewright import removal
from nodewright.api import webhooks
from nodewright.cluster import NotFound, ServerBusy, objects
from nodewright.cluster.install import uninstall_webhooks
from nodewright.cluster.resources import CRDS, NODEPOOLS, VALIDATING_WEBHOOKS
from nodewright.removal import RemovalReport, drain_nodes
from nodewright.termination.terminate import DEADLINE_ANNOTATION

from .conftest import CRD_PATH

URL = "https://abc.lambda-url.us-west-2.on.aws/0123456789abcdef0123456789abcdefghijklmnopqrstuv"


def _claimed_node(world: Any, name: str, instance: str, **claim_spec: Any) -> None:
    world.node(name, instance)
    world.nodeclaim(f"claim-{name}", instance, name, **claim_spec)


def _report() -> RemovalReport:
    return RemovalReport(cluster_name="sandbox")


@pytest.fixture
def installed(cluster: Any, crds: None) -> None:
    """What ``install-webhooks --apply`` leaves: the wake-up's configuration, both CRDs converting."""
    from nodewright.cluster import install

    for document in webhooks.install_documents(f"{URL}/admit", f"{URL}/convert"):
        resource = CRDS if document["kind"] == "CustomResourceDefinition" else VALIDATING_WEBHOOKS
        install.apply(cluster, resource, document)


def test_the_webhooks_are_taken_out_and_the_crds_serve_v1_only_with_their_objects_kept(
    cluster: Any, installed: None
) -> None:
    from sandbox.scenarios.workloads import nodepool

    cluster.create(NODEPOOLS, nodepool("default", []))
    assert uninstall_webhooks(cluster) == [
        "validatingwebhookconfiguration/nodewright-wakeup deleted",
        "customresourcedefinition/nodepools.karpenter.sh serves v1 only, no conversion webhook",
        "customresourcedefinition/ec2nodeclasses.karpenter.k8s.aws serves v1 only, no conversion webhook",
    ]
    assert cluster.list(VALIDATING_WEBHOOKS) == []
    for name in webhooks.CONVERTED_CRDS:
        spec = cluster.get(CRDS, name)["spec"]
        assert spec["conversion"] == {"strategy": "None"}  # the webhook (and its URL) gone
        assert [(v["name"], v["served"], v["storage"]) for v in spec["versions"]] == [("v1", True, True)]
    assert [objects.name_of(p) for p in cluster.list(NODEPOOLS)] == ["default"]  # stored v1: untouched
    with pytest.raises(NotFound):
        cluster.request("GET", "/apis/karpenter.sh/v1beta1/nodepools")
    # again (a retried Delete): nothing to do, nothing written
    before = cluster.get(CRDS, "nodepools.karpenter.sh")["metadata"]["resourceVersion"]
    assert uninstall_webhooks(cluster)[0] == "validatingwebhookconfiguration/nodewright-wakeup not found"
    assert cluster.get(CRDS, "nodepools.karpenter.sh")["metadata"]["resourceVersion"] == before


def test_a_version_objects_were_stored_in_stays_listed_but_is_no_longer_served(
    cluster: Any, installed: None
) -> None:
    """A cluster that stored v1beta1 objects before (an old Karpenter) keeps v1beta1 in
    status.storedVersions, and the API server refuses a CRD whose spec.versions drops it."""
    name = "nodepools.karpenter.sh"
    crd = cluster.get(CRDS, name)
    cluster.request(
        "PUT",
        f"{CRD_PATH}/{name}/status",
        body={**crd, "status": {**crd["status"], "storedVersions": ["v1beta1", "v1"]}},
    )
    uninstall_webhooks(cluster)
    spec = cluster.get(CRDS, name)["spec"]
    assert [(v["name"], v["served"], v["storage"]) for v in spec["versions"]] == [
        ("v1", True, True),
        ("v1beta1", False, False),
    ]
    assert spec["conversion"] == {"strategy": "None"}
    with pytest.raises(NotFound):
        cluster.request("GET", "/apis/karpenter.sh/v1beta1/nodepools")


def test_nodes_drain_under_their_pdb_until_the_removals_deadline_then_everything_goes(
    world: Any, ctx: Any, clock: Any, cloud: Any
) -> None:
    _claimed_node(world, "node-a", "i-0aaaaaaaaaaaaaaa1")
    _claimed_node(world, "node-b", "i-0bbbbbbbbbbbbbbb2")
    world.pod("web-1", "node-a", labels={"app": "web"})
    world.pod("pinned-1", "node-b", annotations={"karpenter.sh/do-not-disrupt": "true"})
    world.pdb("web", {"app": "web"}, allowed=0)  # the workload has nowhere to go: never allowed
    report = _report()
    deadline = clock.now() + timedelta(seconds=120)

    drain_nodes(ctx, report, drain_until=deadline)

    assert clock.now() >= deadline - timedelta(seconds=30)  # the PDB was waited for (30 s grace)
    assert (report.pods_evicted, report.pods_deleted_at_deadline) == (1, 1)  # pinned evicted, web forced
    assert sorted(report.nodes_removed) == ["node-a", "node-b"]
    assert sorted(report.nodeclaims_removed) == ["claim-node-a", "claim-node-b"]
    assert sorted(cloud.terminated) == ["i-0aaaaaaaaaaaaaaa1", "i-0bbbbbbbbbbbbbbb2"]
    assert world.cluster.list_nodeclaims() == []
    assert world.cluster.list_nodes() == []
    assert world.pod_names() == []


def test_a_nodeclaims_own_termination_grace_period_bounds_the_drain_sooner(
    world: Any, ctx: Any, clock: Any, cloud: Any
) -> None:
    _claimed_node(world, "node-a", "i-0aaaaaaaaaaaaaaa1", terminationGracePeriod="60s")
    world.pod("web-1", "node-a", labels={"app": "web"}, grace=10)
    world.pdb("web", {"app": "web"}, allowed=0)
    start = clock.now()

    drain_nodes(ctx, _report(), drain_until=start + timedelta(minutes=10))

    assert world.cluster.list_nodes() == []
    assert clock.now() - start < timedelta(minutes=2), "not the removal's ten minutes"


class LambdaTimeout(BaseException):
    """Lambda ending the invocation: no handler code runs after it."""


def test_a_removal_cut_short_is_resumed_by_the_retry_with_the_first_runs_deadline(
    world: Any, ctx: Any, clock: Any, cloud: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _claimed_node(world, "node-a", "i-0aaaaaaaaaaaaaaa1")
    world.pod("web-1", "node-a", labels={"app": "web"})
    world.pdb("web", {"app": "web"}, allowed=0)
    first_deadline = clock.now() + timedelta(seconds=300)

    def killed(*args: Any, **kwargs: Any) -> Any:
        raise LambdaTimeout

    with monkeypatch.context() as patched:
        patched.setattr(removal.termination, "reconcile", killed)
        with pytest.raises(LambdaTimeout):
            drain_nodes(ctx, _report(), drain_until=first_deadline)
    claim = world.cluster.get_nodeclaim("claim-node-a")
    assert objects.is_deleting(claim)  # marked: the retry finds it half-done
    recorded = objects.parse_time(objects.annotations_of(claim)[DEADLINE_ANNOTATION])
    assert recorded == first_deadline.replace(microsecond=0)
    assert cloud.terminated == []

    retry = _report()
    drain_nodes(ctx, retry, drain_until=first_deadline + timedelta(minutes=10))

    assert retry.nodeclaims_removed == ["claim-node-a"]
    assert retry.pods_deleted_at_deadline == 1
    assert clock.now() < first_deadline + timedelta(seconds=60), "the first run's deadline held"
    assert world.cluster.list_nodeclaims() == []
    assert cloud.terminated == ["i-0aaaaaaaaaaaaaaa1"]


def test_a_transient_api_error_is_waited_out_and_the_drain_goes_on(
    world: Any, ctx: Any, clock: Any, cloud: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _claimed_node(world, "node-a", "i-0aaaaaaaaaaaaaaa1")
    world.pod("web-1", "node-a", labels={"app": "web"})
    real = removal.termination.reconcile
    calls = {"n": 0}

    def flaky(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            raise ServerBusy(503, "etcd leader changed")
        return real(*args, **kwargs)

    monkeypatch.setattr(removal.termination, "reconcile", flaky)
    report = _report()
    drain_nodes(ctx, report, drain_until=clock.now() + timedelta(seconds=120))

    assert calls["n"] == 2
    assert (report.pods_evicted, report.pods_deleted_at_deadline) == (1, 0)  # drained, not forced
    assert report.nodes_removed == ["node-a"]


def test_a_node_of_a_nodewright_instance_without_a_nodeclaim_is_drained_and_released_too(
    world: Any, ctx: Any, clock: Any, cloud: Any
) -> None:
    from fakes import instance

    launched = instance(
        "i-0ccccccccccccccc3", "m5.large", "us-west-2a", "spot", "gone", launch_time=clock.now()
    )
    cloud.instances[launched.id] = launched
    world.node("node-c", "i-0ccccccccccccccc3")  # its NodeClaim deleted by hand, the node kept
    world.node("system-1", "i-0ddddddddddddddd4")  # not Nodewright's: no NodeClaim, not its instance
    world.pod("web-1", "node-c", labels={"app": "web"})
    report = _report()

    drain_nodes(ctx, report, drain_until=clock.now() + timedelta(seconds=60))

    assert report.nodes_removed == ["node-c"]
    assert [objects.name_of(n) for n in world.cluster.list_nodes()] == ["system-1"]
    assert cloud.terminated == ["i-0ccccccccccccccc3"]
    assert report.pods_evicted == 1
