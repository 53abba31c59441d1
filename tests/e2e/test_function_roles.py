"""Each function, run in the sandbox as its own role, does its real work, and no more.

The sandbox evaluates every AWS request a function signs against that function's role as
``cdk synth`` produces it (``sandbox/iam``). Here each real handler runs its real work end to end
(the provisioner's spot launch and its launch-template pruning, spot_events' and interruption's
replacements and drains, disruption's expiration, consolidation replace and drift reads, the
price refresh, the webhook's secret and wake-up, the removal at ``cdk destroy``) and must meet no
denial; then each role is asked, with its own keys, for what it must not do, and AWS's refusal
comes back in each service's own error shape. Last, the check is shown to bite: with one
statement dropped from the disruption role, a consolidation replace is refused CreateFleet and
abandons its command saying so.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError
from nodewright.api import labels
from nodewright.cluster.resources import EC2NODECLASSES, EVENTS, NODECLAIMS, NODEPOOLS, NODES, PODS
from nodewright.disruption import consolidation, drift, flow
from nodewright.state.pods import is_provisionable
from waiting import wait_for

from sandbox.aws.server import aws_client
from sandbox.runtime import events
from sandbox.runtime.events import scheduled_event
from sandbox.runtime.lambdas import LambdaContext, load_function, provisioner_invocation
from sandbox.scenarios.workloads import DEPLOYMENTS, REPLICASETS, inflate, nodeclass, nodepool

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(600)]

ACCOUNT = "123456789012"
ON_DEMAND = {"key": labels.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}
M5 = {"key": labels.INSTANCE_TYPE, "operator": "In", "values": ["m5.large", "m5.xlarge"]}
CONSOLIDATE = {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "1s"}
# Every call a function makes that its role must allow, by function (what the suite checks it made).
REAL_WORK = {
    "provisioner": {
        "ec2:CreateFleet",
        "ec2:CreateLaunchTemplate",
        "iam:CreateInstanceProfile",
        "iam:PassRole",
    },
    "spot_events": {"ec2:CreateFleet", "dynamodb:PutItem"},
    "interruption": {"ec2:CreateFleet", "ec2:TerminateInstances", "dynamodb:PutItem", "sqs:ReceiveMessage"},
    "disruption": {"ec2:TerminateInstances", "ec2:DescribeCapacityReservations"},  # drift reads
    "pricing": {"ec2:DescribeSpotPriceHistory", "dynamodb:PutItem"},
}


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Any]:
    from sandbox import Sandbox

    with Sandbox(cluster_name="e2e-roles", boot_delay=0.2, init_delay=0.2) as sb:
        sb.apply_crds()
        yield sb


@pytest.fixture
def env(sandbox: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from nodewright.cloud import aws
    from nodewright.cluster import reset_connections

    for key, value in sandbox.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "NodewrightE2E")
    monkeypatch.setattr(consolidation, "NOMINATION_SECONDS", 1.0)
    monkeypatch.setattr(consolidation, "VALIDATION_SECONDS", 2.0)
    drift.forget_dynamic()
    flow.forget_proposals()
    sandbox.warm_catalog()
    sandbox.iam.denials.clear()
    yield sandbox
    reset_connections()
    aws.reset_clients()


def fresh_container() -> None:
    """What a function's own container starts with (each runs alone in Lambda): no cache, provider
    or connection left by another function run in this process. Only the instance catalog is kept
    (moto's DescribeInstanceTypes takes 5-7 s; every function that reads it holds the same grant)."""
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


def run(function: str, event: Any, seconds: float) -> Any:
    """One invocation of the real handler, loaded as Lambda loads it (signing as its own role)."""
    fresh_container()
    handler = load_function(function).handler
    if function == "provisioner":  # its loop lasts ``seconds``; its writes keep a real timeout
        with provisioner_invocation(seconds) as context:
            return handler(event, context)
    return handler(event, LambdaContext(seconds, f"nodewright-{function}"))


def launched_instance(kube: Any, exclude: set[str]) -> str:
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

    wait_for("a new node", registered, 45)
    return found[0]


def claim_of(kube: Any, instance_id: str) -> dict[str, Any]:
    return next(c for c in kube.list(NODECLAIMS) if c["status"].get("providerID", "").endswith(instance_id))


def allowed_actions(sb: Any, function: str) -> set[str]:
    return {action for name, action, _, _ in sb.iam.allowed if name == function}


def empty(kube: Any, sb: Any) -> None:
    """Back to an empty cluster (as the sandbox's owner)."""
    for deployment in kube.list(DEPLOYMENTS, namespace="default"):
        kube.delete(DEPLOYMENTS, deployment["metadata"]["name"], namespace="default")
    ec2 = sb.aws_client("ec2")
    try:
        reservations = ec2.describe_instances(
            Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}]
        )["Reservations"]
        ids = [i["InstanceId"] for r in reservations for i in r["Instances"]]
        if ids:
            ec2.terminate_instances(InstanceIds=ids)
    finally:
        ec2.close()
    for claim in kube.list(NODECLAIMS):
        kube.patch(NODECLAIMS, claim["metadata"]["name"], {"metadata": {"finalizers": None}})
        kube.delete(NODECLAIMS, claim["metadata"]["name"])
    for pool in kube.list(NODEPOOLS):
        kube.delete(NODEPOOLS, pool["metadata"]["name"])
    for nodeclass_ in kube.list(EC2NODECLASSES):
        kube.delete(EC2NODECLASSES, nodeclass_["metadata"]["name"])

    def emptied() -> bool:
        # The ReplicaSets too: the garbage collector removes a deleted Deployment's ReplicaSet on its
        # own time, and one still there recreates a pod after this looked empty; the next test then
        # found that pod pending and its first pass launched a second node for it.
        for replicaset in kube.list(REPLICASETS, namespace="default"):
            kube.delete(REPLICASETS, replicaset["metadata"]["name"], namespace="default")
        for pod in kube.list(PODS, namespace="default"):
            kube.delete(PODS, pod["metadata"]["name"], namespace="default", grace_period_seconds=0)
        for node in kube.list(NODES):
            kube.patch(NODES, node["metadata"]["name"], {"metadata": {"finalizers": None}})
            kube.delete(NODES, node["metadata"]["name"])
        for claim in kube.list(NODECLAIMS):
            kube.patch(NODECLAIMS, claim["metadata"]["name"], {"metadata": {"finalizers": None}})
            kube.delete(NODECLAIMS, claim["metadata"]["name"])
        return not any(
            (
                kube.list(DEPLOYMENTS, namespace="default"),
                kube.list(REPLICASETS, namespace="default"),
                kube.list(PODS, namespace="default"),
                kube.list(NODES),
                kube.list(NODECLAIMS),
            )
        )

    wait_for("the cluster to empty", emptied, 20)


# --- the real work -----------------------------------------------------------------------------------


def test_every_function_does_its_real_work_under_its_own_role(env: Any) -> None:
    from botocore.stub import Stubber
    from nodewright.cloud import aws
    from nodewright.settings import Settings

    from sandbox.iam.authorization import Call

    kube = env.admin_cluster()  # the user's side; the handlers act as the functions' identity
    kube.create(EC2NODECLASSES, nodeclass(env))
    spot = [
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
        {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m"]},
    ]
    kube.create(NODEPOOLS, nodepool("spot", spot))
    # One pod per node: each displaced pod needs a replacement launch of its own.
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
    wait_for(
        "2 unschedulable pods",
        lambda: sum(1 for p in kube.list_pending_pods() if is_provisionable(p)) == 2,
        30,
    )
    try:
        # provisioner: a spot launch
        run("provisioner", scheduled_event(), 30)
        first = launched_instance(kube, set())
        # spot_events: a spot warning → a replacement launch and a drain
        direct = run("spot_events", events.spot_warning(first), 60)
        assert direct["disposition"] == "acted", direct
        second = launched_instance(kube, {first})
        wait_for(
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
            # The replacement registers tainted karpenter.sh/unregistered (its user data says so);
            # the provisioner's next pass (its schedule, or the wake-up) lifts it, as deployed.
            step=lambda: run("provisioner", scheduled_event(), 3),
        )
        # interruption: a rebalance recommendation through the queue, polled as Lambda's event
        # source mapping does (with the interruption role) → a replacement, a drain, a termination
        queue = env.aws.interruption_queue_url
        owner_sqs = env.aws_client("sqs")
        owner_sqs.send_message(
            QueueUrl=queue, MessageBody=json.dumps(events.rebalance_recommendation(second))
        )
        owner_sqs.close()
        poller = aws_client("sqs", env.aws_endpoint, env.region, env.credentials("interruption"))
        got = poller.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, WaitTimeSeconds=1)["Messages"]
        batch = events.sqs_event(
            [events.sqs_record(m["Body"], receipt_handle=m["ReceiptHandle"]) for m in got]
        )
        assert run("interruption", batch, 60) == {"batchItemFailures": []}
        poller.delete_message(QueueUrl=queue, ReceiptHandle=got[0]["ReceiptHandle"])
        poller.close()
        third = launched_instance(kube, {first, second})
        # disruption: the last node's NodeClaim deleted (a NodeClaim's spec is immutable, so expiry
        # cannot be shortened after launch) → its pass drains the node and terminates the instance
        kube.delete(NODECLAIMS, claim_of(kube, third)["metadata"]["name"])
        run("disruption", scheduled_event(), 30)
        # every function that plans a launch reads the capacity reservations an EC2NodeClass selects
        # (its reserved offerings; disruption's status and drift too): one regional read statement
        reservations = Call("ec2", "DescribeCapacityReservations", {}, env.region, ACCOUNT, "")
        with env.iam.expecting_denials():
            readers = {f for f in REAL_WORK if env.iam.authorize(env.iam.identity(f), reservations).allowed}
        assert readers == {"provisioner", "disruption", "interruption", "spot_events"}
        # pricing: the Pricing API is not in moto; an empty page answers it (the call is what is recorded)
        pricing = aws.client("pricing", Settings.from_env({**dict(env.env()), **env.credentials("pricing")}),
                             region=aws.PRICING_API_REGION)  # fmt: skip
        with Stubber(pricing) as stub:
            stub.add_response("get_products", {"PriceList": [], "FormatVersion": "aws_v1"})
            run("pricing", scheduled_event(), 30)
    finally:
        empty(kube, env)

    assert [d.message for d in env.iam.denials if not d.expected] == []
    for function, needed in REAL_WORK.items():
        assert needed <= allowed_actions(env, function), (function, needed - allowed_actions(env, function))


def test_the_provisioner_prunes_launch_templates_and_the_removal_removes_everything(env: Any) -> None:
    """The provisioner's lifecycle deletes unused launch templates (DeleteLaunchTemplate); the removal
    at ``cdk destroy`` lists and deletes this cluster's templates and instance profiles."""
    from datetime import timedelta

    from nodewright.cloud.cleanup import remove_cluster_resources
    from nodewright.cloud.nodeclass import NodeClass
    from nodewright.cloud.provider import CloudProvider
    from nodewright.settings import Settings

    base = dict(env.env())
    provisioner = CloudProvider(Settings.from_env({**base, **env.credentials("provisioner")}))
    profile = provisioner.templates.instance_profile(NodeClass(nodeclass(env)))
    ec2 = env.aws_client("ec2")
    try:
        made = ec2.create_launch_template(
            LaunchTemplateName=f"nodewright/{env.cluster_name}/prune-me",
            LaunchTemplateData={"ImageId": next(iter(env.aws.images.values()))},
            TagSpecifications=[
                {
                    "ResourceType": "launch-template",
                    "Tags": [
                        {"Key": f"kubernetes.io/cluster/{env.cluster_name}", "Value": "owned"},
                        {"Key": "karpenter.sh/nodepool", "Value": "default"},
                        {"Key": "karpenter.k8s.aws/cluster", "Value": env.cluster_name},
                    ],
                }
            ],
        )["LaunchTemplate"]
    finally:
        ec2.close()
    assert made["LaunchTemplateName"] in provisioner.templates.cleanup(min_age=timedelta(0))
    cleanup = CloudProvider(Settings.from_env({**base, **env.credentials("cleanup")}))
    report = remove_cluster_resources(cleanup)
    assert profile in report.instance_profiles_deleted, report
    assert [d.message for d in env.iam.denials if not d.expected] == []
    assert "ec2:DeleteLaunchTemplate" in allowed_actions(env, "provisioner")
    assert {"iam:ListInstanceProfiles", "iam:DeleteInstanceProfile"} <= allowed_actions(env, "cleanup")


def test_the_webhook_reads_its_secret_and_wakes_only_the_provisioner_alias(env: Any) -> None:
    """Its role (infra/capabilities/wakeup.py): GetSecretValue of its secret, and lambda:Invoke of the
    provisioner's wakeup alias only; a secret or function it was not given is refused."""
    owner = env.aws_client("secretsmanager")
    arn = owner.create_secret(
        Name=f"nodewright-{env.cluster_name}-webhook-path-roles", SecretString="x" * 48
    )["ARN"]
    other = owner.create_secret(Name="someone-elses", SecretString="y")["ARN"]
    owner.close()
    webhook_env = {
        "WEBHOOK_SECRET_ARN": arn,
        "WAKE_FUNCTION": f"arn:aws:lambda:{env.region}:123456789012:function:nodewright-provisioner:wakeup",
    }
    env.iam.learn(webhook_env, "webhook")  # the physical names the stack gives it (Ref)
    secrets = aws_client("secretsmanager", env.aws_endpoint, env.region, env.credentials("webhook"))
    try:
        assert secrets.get_secret_value(SecretId=arn)["SecretString"] == "x" * 48
        with pytest.raises(ClientError) as refused, env.iam.expecting_denials():
            secrets.get_secret_value(SecretId=other)
        assert refused.value.response["Error"]["Code"] == "AccessDeniedException"
        assert "secretsmanager:GetSecretValue" in refused.value.response["Error"]["Message"]
    finally:
        secrets.close()
    principal = env.iam.identity("webhook").principal
    from sandbox.iam.authorization import Call

    wake = Call(
        "lambda",
        "Invoke",
        {"FunctionName": webhook_env["WAKE_FUNCTION"]},
        env.region,
        "123456789012",
        principal,
    )
    assert env.iam.authorize(env.iam.identity("webhook"), wake).allowed
    elsewhere = Call(
        "lambda", "Invoke", {"FunctionName": "nodewright-disruption"}, env.region, "123456789012", principal
    )
    with env.iam.expecting_denials():
        assert not env.iam.authorize(env.iam.identity("webhook"), elsewhere).allowed


# --- and no more -------------------------------------------------------------------------------------


def refused(call: Callable[[], Any]) -> dict[str, Any]:
    with pytest.raises(ClientError) as raised:
        call()
    return dict(raised.value.response["Error"]) | {
        "status": raised.value.response["ResponseMetadata"]["HTTPStatusCode"]
    }


def test_each_role_is_refused_what_it_must_not_do_in_each_services_own_shape(env: Any) -> None:
    owner = env.aws_client("ec2")
    foreign = owner.run_instances(ImageId=next(iter(env.aws.images.values())), MinCount=1, MaxCount=1)
    foreign_id = foreign["Instances"][0]["InstanceId"]  # not tagged for this cluster
    owner.close()
    client = {
        (function, service): aws_client(service, env.aws_endpoint, env.region, env.credentials(function))
        for function in ("pricing", "disruption", "provisioner", "webhook")
        for service in ("ec2", "sqs", "dynamodb", "iam")
    }
    with env.iam.expecting_denials():
        refusals(env, client, foreign_id)
    assert {d.function for d in env.iam.denials} == {"disruption", "pricing", "provisioner", "webhook"}


def refusals(env: Any, client: dict[tuple[str, str], Any], foreign_id: str) -> None:
    try:
        # EC2: 403 UnauthorizedOperation, with the principal, the action, the resource and the encoded message
        error = refused(lambda: client["disruption", "ec2"].terminate_instances(InstanceIds=[foreign_id]))
        assert (error["Code"], error["status"]) == ("UnauthorizedOperation", 403)
        assert error["Message"].startswith(
            "You are not authorized to perform this operation. User: arn:aws:sts::"
        )
        assert (
            f"is not authorized to perform: ec2:TerminateInstances on resource: arn:aws:ec2:{env.region}:"
            in error["Message"]
        )
        assert "Encoded authorization failure message: " in error["Message"]
        error = refused(client["pricing", "ec2"].describe_instances)
        assert error["Code"] == "UnauthorizedOperation"
        # The queue is the interruption function's alone: SQS's AccessDenied (the action in lower case)
        queue = env.aws.interruption_queue_url
        error = refused(lambda: client["provisioner", "sqs"].receive_message(QueueUrl=queue))
        assert (error["Code"], error["status"]) == ("AccessDenied", 403)
        assert "sqs:receivemessage" in error["Message"]
        # DynamoDB: 400 AccessDeniedException; disruption reads (and marks) offerings, never deletes
        key = {"pk": {"S": "x"}, "sk": {"S": "y"}}
        error = refused(
            lambda: client["disruption", "dynamodb"].delete_item(TableName=env.aws.state_table, Key=key)
        )
        assert (error["Code"], error["status"]) == ("AccessDeniedException", 400)
        # IAM: AccessDenied; only the node role may be passed, by the launching functions
        error = refused(lambda: client["pricing", "iam"].get_instance_profile(InstanceProfileName="x"))
        assert (error["Code"], error["status"]) == ("AccessDenied", 403)
        # The webhook touches no EC2 at all
        assert refused(client["webhook", "ec2"].describe_subnets)["Code"] == "UnauthorizedOperation"
        # A key the sandbox does not know is refused as AWS refuses one
        stranger = aws_client(
            "ec2",
            env.aws_endpoint,
            env.region,
            {"AWS_ACCESS_KEY_ID": "AKIAUNKNOWN", "AWS_SECRET_ACCESS_KEY": "x"},
        )
        assert refused(stranger.describe_subnets)["Code"] == "AuthFailure"
        stranger.close()
    finally:
        for each in client.values():
            each.close()


# --- the check bites ---------------------------------------------------------------------------------


def test_without_its_create_fleet_statement_a_consolidation_replace_is_refused_and_abandoned(
    env: Any,
) -> None:
    """Drop the statement that lets disruption launch from this cluster's launch templates: the
    replace is denied ec2:CreateFleet on its launch template, the replacement fails to launch
    (UnauthorizedOperation) and the command is abandoned saying so; the candidate keeps running,
    untainted."""
    kube = env.admin_cluster()
    kube.create(EC2NODECLASSES, nodeclass(env))
    kube.create(NODEPOOLS, nodepool("m5", [ON_DEMAND, M5], disruption=CONSOLIDATE))
    try:
        big = inflate(1, cpu="3", memory="256Mi")
        big["metadata"]["name"] = "big"
        big["spec"]["selector"] = {"matchLabels": {"app": "big"}}
        big["spec"]["template"]["metadata"] = {"labels": {"app": "big"}}
        kube.create(DEPLOYMENTS, big, namespace="default")
        wait_for("big to be pending", lambda: bool(kube.list_pending_pods()), 30)
        run("provisioner", scheduled_event(), 8)
        small = inflate(1, cpu="250m", memory="256Mi")
        small["metadata"]["name"] = "small"
        small["spec"]["selector"] = {"matchLabels": {"app": "small"}}
        small["spec"]["template"]["metadata"] = {"labels": {"app": "small"}}
        kube.create(DEPLOYMENTS, small, namespace="default")

        def running(app: str) -> list[str]:
            return [
                p["spec"]["nodeName"]
                for p in kube.list(PODS, namespace="default")
                if (p["metadata"].get("labels") or {}).get("app") == app
                and (p.get("status") or {}).get("phase") == "Running"
            ]

        # The provisioner's next passes lift the new node's karpenter.sh/unregistered taint (its
        # launching invocation may end before the node registers, on a loaded machine).
        wait_for(
            "big and small running",
            lambda: bool(running("big")) and bool(running("small")),
            60,
            step=lambda: run("provisioner", scheduled_event(), 1),
        )
        kube.patch(DEPLOYMENTS, "big", {"spec": {"replicas": 0}}, namespace="default")
        wait_for("big gone", lambda: not running("big"), 30)
        (candidate,) = [c["metadata"]["name"] for c in kube.list(NODECLAIMS)]

        with (
            env.iam.without_statement("disruption", "LaunchFromOwnedLaunchTemplates"),
            env.iam.expecting_denials(),
        ):
            abandoned: list[dict[str, Any]] = []
            deadline = time.monotonic() + 120
            while not abandoned:
                if time.monotonic() > deadline:
                    pytest.fail("no command was abandoned within 120s")
                run("provisioner", scheduled_event(), 1)  # registers and initializes the node
                report = run("disruption", scheduled_event(), 12)
                abandoned = [c for c in report["commands"] if c["action"] == "abandoned"]
        (command,) = abandoned
        assert command["nodeclaims"] == [candidate]
        assert "UnauthorizedOperation" in command["detail"], command
        assert "ec2:CreateFleet" in command["detail"], command
        denied = [d for d in env.iam.denials if d.function == "disruption"]
        assert denied
        assert {(d.action, d.resource.rsplit(":", 1)[1].split("/")[0]) for d in denied} == {
            ("ec2:CreateFleet", "launch-template")
        }
        failed = [e for e in kube.list(EVENTS, namespace="default") if e["reason"] == "LaunchFailed"]
        assert any("UnauthorizedOperation" in e["message"] for e in failed), [e["message"] for e in failed]
        node = kube.get(NODES, running("small")[0])
        assert not any(t.get("key") == labels.DISRUPTED_TAINT_KEY for t in node["spec"].get("taints") or [])
    finally:
        empty(kube, env)
