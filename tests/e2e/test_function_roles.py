"""Each real handler, run in the sandbox, makes only AWS calls its own role grants.

The stack gives every function a role with only the grants it uses
(``infra.capabilities.permissions.FUNCTION_GRANTS`` and ``TABLE_ACTIONS``). Narrowing is only
safe if it matches what the code really calls, and the flows change: this scenario runs the
provisioner (a spot launch), spot_events (a replacement launch, a drain, a termination), the
queue path, a disruption pass and the price refresh through their real handlers, records every
AWS operation each one makes (botocore's ``before-parameter-build`` on every client the layer
builds, through its one session), and
checks that each is an action its role holds. Resource and condition scoping of those actions is
evaluated in tests/infra/test_infra_iam_eval.py and test_infra_iam_tags.py.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from nodewright.cluster.resources import EC2NODECLASSES, NODECLAIMS, NODEPOOLS
from nodewright.state.pods import is_provisionable

from sandbox import events
from sandbox.events import scheduled_event
from sandbox.lambdas import LambdaContext, load_function, provisioner_invocation
from sandbox.workloads import DEPLOYMENTS, inflate, nodeclass, nodepool

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

# What every role also holds, outside permissions.py: its log group (Lambda writes the logs, the
# code never calls CloudWatch Logs) and, for the interruption function, the queue's consume grant.
QUEUE_CONSUMER = {
    "sqs:ReceiveMessage",
    "sqs:DeleteMessage",
    "sqs:ChangeMessageVisibility",
    "sqs:GetQueueAttributes",
}


class Recorder:
    """The AWS operations the layer's clients make, by the function running at the time."""

    def __init__(self) -> None:
        self.current: str | None = None
        self.calls: dict[str, set[str]] = {}
        self._hooked: set[int] = set()

    def hook(self, client: Any) -> Any:
        if id(client) not in self._hooked:
            client.meta.events.register("before-parameter-build", self._record)
            self._hooked.add(id(client))
        return client

    def _record(self, model: Any, **_: Any) -> None:
        if self.current is not None:
            action = f"{model.service_model.signing_name}:{model.name}"
            self.calls.setdefault(self.current, set()).add(action)

    def run(self, function: str, handler: Any, event: Any, seconds: float) -> Any:
        fresh_container()
        self.current = function
        try:
            if function == "provisioner":  # its loop lasts ``seconds``; its writes keep a real timeout
                with provisioner_invocation(seconds) as context:
                    return handler(event, context)
            return handler(event, LambdaContext(seconds, f"nodewright-{function}"))
        finally:
            self.current = None


def fresh_container() -> None:
    """What a function's own container would start with (each runs alone in Lambda): no cache,
    provider or connection left by another function run in this process (each handler module,
    loaded afresh, holds its own container and processor). Only the instance catalog is kept:
    moto's DescribeInstanceTypes takes 5-7 s, and every function that reads it holds the same
    Describe* grant."""
    from nodewright.cloud import catalog, eks
    from nodewright.cloud.provider import CloudProvider
    from nodewright.cluster import reset_connections
    from nodewright.settings import Settings

    settings = Settings.from_env()
    key = (settings.region, settings.aws_endpoint_url)
    known = catalog._CATALOGS.get(key)
    catalog.clear_caches()
    if known is not None:
        catalog.prime_catalog(key, known)
    eks.clear_cache()
    CloudProvider._shared.clear()
    reset_connections()


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Any]:
    from sandbox import Sandbox

    with Sandbox(cluster_name="e2e-roles", boot_delay=0.2, init_delay=0.2) as sb:
        sb.apply_crds()
        yield sb


@pytest.fixture
def recorder(sandbox: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Recorder]:
    from nodewright.cloud import aws
    from nodewright.cluster import reset_connections

    for key, value in sandbox.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "NodewrightE2E")
    aws.reset_clients()
    recording = Recorder()

    class RecordingSession(boto3.session.Session):
        """The layer builds every client from one session (nodewright.cloud.aws): hook them all."""

        def client(self, *args: Any, **kwargs: Any) -> Any:
            return recording.hook(super().client(*args, **kwargs))

    monkeypatch.setattr(aws, "_session", RecordingSession())
    yield recording
    reset_connections()
    aws.reset_clients()


def granted_actions(function: str) -> set[str]:
    from infra.capabilities.permissions import FUNCTION_GRANTS, GRANTS, TABLE_ACTIONS, PolicyInputs

    inputs = PolicyInputs(
        cluster_name="c", cluster_arn="arn:aws:eks:r:1:cluster/c", node_role_arn="arn:aws:iam::1:role/n"
    )
    actions = {a for grant in FUNCTION_GRANTS[function] for s in GRANTS[grant](inputs) for a in s.actions}
    actions |= set(TABLE_ACTIONS[function])
    if function == "interruption":
        actions |= QUEUE_CONSUMER
    return actions


def _wait(what: str, check: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.1)


def _launched_instance(kube: Any, exclude: set[str]) -> str:
    """The instance of a NodeClaim not in ``exclude``, once its node has registered."""
    found: list[str] = []

    def registered() -> bool:
        nodes = {n["spec"].get("providerID", "") for n in kube.list_nodes()}
        for claim in kube.list(NODECLAIMS):
            provider_id = (claim.get("status") or {}).get("providerID", "")
            instance = provider_id.rsplit("/", 1)[-1]
            if provider_id and instance not in exclude and provider_id in nodes:
                found.append(instance)
                return True
        return False

    _wait("a new node", registered, 45)
    return found[0]


def _claim_of(kube: Any, instance_id: str) -> dict[str, Any]:
    return next(c for c in kube.list(NODECLAIMS) if c["status"].get("providerID", "").endswith(instance_id))


def test_every_call_of_every_function_is_granted_to_its_own_role(sandbox: Any, recorder: Recorder) -> None:
    from botocore.stub import Stubber
    from nodewright.cloud import aws
    from nodewright.settings import Settings

    kube = sandbox.admin_cluster()  # the user's side; the handlers act as the functions' identity
    kube.create(EC2NODECLASSES, nodeclass(sandbox))
    spot = [
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
        {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m"]},
    ]
    kube.create(NODEPOOLS, nodepool("spot", spot))
    # One pod per node: each displaced pod needs a replacement launch of its own, so the interruption
    # function's CreateFleet does not depend on whether an earlier replacement had room to spare.
    apart = inflate(2)
    apart["spec"]["template"]["spec"]["affinity"] = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"app": "inflate"}},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }
    kube.create(DEPLOYMENTS, apart, namespace="default")
    _wait(
        "2 unschedulable pods",
        lambda: sum(1 for p in kube.list_pending_pods() if is_provisionable(p)) == 2,
        30,
    )

    # provisioner: a spot launch
    recorder.run("provisioner", load_function("provisioner").handler, scheduled_event(), 30)
    first = _launched_instance(kube, set())
    # spot_events: a spot warning → a replacement launch and a drain (EC2 ends the instance itself)
    warning = events.spot_warning(first)
    direct = recorder.run("spot_events", load_function("spot_events").handler, warning, 60)
    assert direct["disposition"] == "acted", direct
    second = _launched_instance(kube, {first})
    # The warned node's pod running again on its replacement, so the next replacement cannot be it.
    _wait(
        "both inflate pods running on nodes",
        lambda: (
            sum(
                1
                for p in kube.list_pods(namespace="default", label_selector="app=inflate")
                if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")
            )
            == 2
        ),
        60,
    )
    # interruption: a rebalance recommendation on the queue → a replacement, a drain, a termination
    rebalance = events.rebalance_recommendation(second)
    batch = events.sqs_batches([json.dumps(rebalance)])[0]
    assert recorder.run("interruption", load_function("interruption").handler, batch, 60) == {
        "batchItemFailures": []
    }
    third = _launched_instance(kube, {first, second})
    # disruption: the last node expired → drained and terminated
    kube.patch(NODECLAIMS, _claim_of(kube, third)["metadata"]["name"], {"spec": {"expireAfter": "1s"}})
    time.sleep(1.5)
    recorder.run("disruption", load_function("disruption").handler, scheduled_event(), 30)
    # pricing: the Pricing API is not in moto; an empty page answers it (the call is what is recorded)
    pricing = aws.client("pricing", Settings.from_env(), region=aws.PRICING_API_REGION)
    with Stubber(pricing) as stub:
        stub.add_response("get_products", {"PriceList": [], "FormatVersion": "aws_v1"})
        recorder.run("pricing", load_function("pricing").handler, scheduled_event(), 30)

    calls = recorder.calls
    assert {"ec2:CreateFleet", "iam:CreateInstanceProfile"} <= calls["provisioner"]
    assert "ec2:CreateFleet" in calls["spot_events"]
    assert {"ec2:CreateFleet", "ec2:TerminateInstances", "dynamodb:PutItem"} <= calls["interruption"]
    assert "ec2:TerminateInstances" in calls["disruption"]
    assert {"pricing:GetProducts", "ec2:DescribeSpotPriceHistory"} <= calls["pricing"]
    ungranted = {function: sorted(made - granted_actions(function)) for function, made in calls.items()}
    assert ungranted == {function: [] for function in calls}, ungranted
    assert set(calls) == {"provisioner", "spot_events", "interruption", "disruption", "pricing"}
