"""``cdk destroy`` in the sandbox: the removal leaves nothing behind, in the cluster or in AWS.

The cluster is a deployed one: the wake-up and the CRD conversion installed as ``nodewright
install-webhooks`` installs them (sandbox/runtime/wakeup.py), the seeds' v1beta1 EC2NodeClass and NodePool
applied unconverted (stored as v1), nodes Nodewright launched running a deployment under a
PodDisruptionBudget and a ``karpenter.sh/do-not-disrupt`` pod that keeps away from it (two nodes at
least), and the cluster's own managed node group (a node more than web pods) where the workload can go. Then
CloudFormation deletes the stack: the functions and their triggers go first (the runtime stops, the
function URL with it), and the removal custom resource's real handler (``functions/cleanup``) runs
in a container of its own, with the environment the stack gives it and the Kubernetes identity of
its access entry (the group deploy/rbac.yaml binds to ``nodewright-cleanup``), invoked with
CloudFormation's Delete event whose presigned ResponseURL is a local HTTP server.

Afterwards nothing in the cluster names the stack's URL (every object of every resource the API
server lists is searched), the CRDs serve v1 and refuse v1beta1 with a plain "no such resource", no
instance Nodewright launched still runs, no launch template or instance profile of the cluster is
left, and the node role can be deleted as CloudFormation deletes it next. The report outlives the
stack in its SSM parameter, the event is never logged whole, and a retried Delete finds nothing.
"""

from __future__ import annotations

import http.server
import json
import os
import shutil
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from nodewright.cluster.resources import NODECLAIMS, NODES, PDBS, PODS, VALIDATING_WEBHOOKS
from nodewright.spec.deployment import FUNCTIONS
from waiting import wait_for

from sandbox.apiserver.testing import KUBECTL, kubectl
from sandbox.aws.eks_amis import nodeadm_user_data
from sandbox.harness import CLUSTER, SEEDS
from sandbox.runtime.stack import INHERITED, Runtime, Worker
from sandbox.scenarios.workloads import DEPLOYMENTS, deployment
from sandbox.shared_data import REPO_ROOT

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.skipif(not shutil.which(KUBECTL), reason="kubectl is not installed"),
]
IMAGE = "public.ecr.aws/eks-distro/kubernetes/pause:3.7"
TICK_SECONDS = 60
SEED_NODECLASS = str(SEEDS / "v1beta1-ec2nodeclass-default.yaml")
SEED_NODEPOOL = str(SEEDS / "v1beta1-nodepool-default.yaml")
# What the stack sets (infra/capabilities/removal.py; tests/infra pins it there).
REPORT_PARAMETER = f"/nodewright/{CLUSTER}/removal-report"
WEB_REPLICAS = 4
STACK_ID = f"arn:aws:cloudformation:us-east-1:123456789012:stack/Nodewright-{CLUSTER}/4a1b2c3d"
SIGNATURE = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
NODEPOOL_TAG = "karpenter.sh/nodepool"


class CloudFormation(http.server.BaseHTTPRequestHandler):
    """The presigned S3 URL a custom resource answers: records every PUT."""

    answers: list[tuple[str, dict[str, str], dict[str, Any]]] = []

    def do_PUT(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.answers.append((self.path, dict(self.headers), json.loads(body)))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        return


@dataclass
class Destroyed:
    """The sandbox after the removal, and what was known before it."""

    sb: Any
    url_host: str  # 127.0.0.1:<port> of the stack's function URL
    secret: str  # its secret path segment
    system_instances: list[str]
    cleanup_kubeconfig: str
    answers: list[tuple[str, dict[str, str], dict[str, Any]]]
    log: str
    reports: list[dict[str, Any]] = field(default_factory=list)
    before: dict[str, Any] = field(default_factory=dict)


def _cleanup_identity(sb: Any, directory: Path) -> str:
    """A kubeconfig for the cleanup's access entry: the group deploy/rbac.yaml binds to its role."""
    (group,) = [
        subject["name"]
        for doc in yaml.safe_load_all((REPO_ROOT / "deploy" / "rbac.yaml").read_text())
        if doc and doc["kind"] == "ClusterRoleBinding" and doc["roleRef"]["name"] == "nodewright-cleanup"
        for subject in doc["subjects"]
    ]
    token = sb.apiserver.add_identity(
        "arn:aws:sts::123456789012:assumed-role/nodewright-cleanup/{{SessionName}}", (group,)
    )
    return str(sb.apiserver.write_kubeconfig(directory / "cleanup-kubeconfig", token=token))


def _cleanup_env(sb: Any, kubeconfig: str) -> dict[str, str]:
    """The removal function's environment: the stack's variables, Lambda's, the sandbox's endpoints."""
    sandbox = sb.env("cleanup")  # its own role's credentials: the sandbox holds it to its policy
    return {
        **{k: os.environ[k] for k in INHERITED if k in os.environ},
        "CLUSTER_NAME": sb.cluster_name,
        "REMOVAL_REPORT_PARAMETER": REPORT_PARAMETER,
        "POWERTOOLS_SERVICE_NAME": f"nodewright-{sb.cluster_name}",
        "POWERTOOLS_METRICS_NAMESPACE": "Nodewright",
        "POWERTOOLS_LOG_LEVEL": "INFO",
        # An operator who turned event logging on for debugging: the ResponseURL must still not leak.
        "POWERTOOLS_LOGGER_LOG_EVENT": "true",
        "AWS_LAMBDA_FUNCTION_NAME": "nodewright-cleanup",
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(FUNCTIONS["cleanup"].memory_mb),
        "PYTHONUNBUFFERED": "1",
        **{
            key: sandbox[key]
            for key in (
                "AWS_REGION",
                "AWS_DEFAULT_REGION",
                "AWS_ENDPOINT_URL",
                "AWS_ACCESS_KEY_ID",
                "AWS_SECRET_ACCESS_KEY",
                "AWS_SESSION_TOKEN",
                "AWS_EC2_METADATA_DISABLED",
                "MOTO_EC2_LOAD_DEFAULT_AMIS",
            )
            if key in sandbox
        },
        "NODEWRIGHT_KUBECONFIG": kubeconfig,
    }


def _delete_event(response_url: str) -> dict[str, Any]:
    return {
        "RequestType": "Delete",
        "ServiceToken": "arn:aws:lambda:us-east-1:123456789012:function:Nodewright-cleanup",
        "ResponseURL": response_url,
        "StackId": STACK_ID,
        "RequestId": "6f0e3c52-5a4c-4c4e-9a6e-8f7c2b1d0e9a",
        "LogicalResourceId": "AutoscalerRemovalResource",
        "PhysicalResourceId": "nodewright-removal-AutoscalerRemovalResource",
        "ResourceType": "AWS::CloudFormation::CustomResource",
        "ResourceProperties": {
            "ServiceToken": "arn:aws:lambda:us-east-1:123456789012:function:Nodewright-cleanup"
        },
    }


def _web_and_pinned(admin: Any) -> None:
    """Four web pods under a PDB (one at a time may go), and a pod that asks not to be disrupted."""
    requests = {"requests": {"cpu": "500m", "memory": "256Mi"}}
    web = deployment(
        "web", WEB_REPLICAS, {"containers": [{"name": "web", "image": IMAGE, "resources": requests}]}
    )
    admin.create(DEPLOYMENTS, web, namespace="default")
    admin.create(
        PDBS,
        {
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 1},
        },
        namespace="default",
    )
    pinned = deployment(
        "pinned",
        1,
        {"containers": [{"name": "pinned", "image": IMAGE, "resources": {"requests": {"cpu": "100m"}}}]},
    )
    pinned["spec"]["template"]["metadata"]["annotations"] = {"karpenter.sh/do-not-disrupt": "true"}
    away_from_web = {
        "labelSelector": {"matchLabels": {"app": "web"}},
        "topologyKey": "kubernetes.io/hostname",
    }
    pinned["spec"]["template"]["spec"]["affinity"] = {
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [away_from_web]}
    }
    admin.create(DEPLOYMENTS, pinned, namespace="default")


def _running_on(admin: Any, app: str) -> dict[str, str]:
    """Running pods of ``app`` (not being deleted) → their node."""
    pods = admin.list(PODS, namespace="default", label_selector=f"app={app}")
    return {
        p["metadata"]["name"]: p["spec"]["nodeName"]
        for p in pods
        if (p.get("status") or {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
    }


def _ready_nodes_of(admin: Any, instances: list[str]) -> set[str]:
    """The Ready nodes of these instances."""
    return {
        n["metadata"]["name"]
        for n in admin.list(NODES)
        if n["spec"].get("providerID", "").rsplit("/", 1)[-1] in instances
        and any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions", []))
    }


def _nodewright_nodes(admin: Any) -> set[str]:
    return {
        n["metadata"]["name"] for n in admin.list(NODES) if NODEPOOL_TAG in n["metadata"].get("labels", {})
    }


def _system_node_group(sb: Any) -> list[str]:
    """The cluster's own managed node group (not Nodewright's): the workload's way out. The pinned
    pod keeps away from the web pods there too, and the scheduler spreads pods (LeastAllocated), so
    the web pods may land on as many nodes as there are of them before the pinned one comes back:
    one node more than web pods leaves it a place whatever the order (with two, a run where both
    took web pods first left it pending)."""
    ec2 = sb.aws_client("ec2")
    try:
        subnet = sb.aws.subnets[sorted(sb.aws.subnets)[0]]
        tags = {
            f"kubernetes.io/cluster/{sb.cluster_name}": "owned",
            "eks:cluster-name": sb.cluster_name,
            "eks:nodegroup-name": "system",
        }
        answer = ec2.run_instances(
            ImageId=sb.aws.images["al2023/x86_64"],
            InstanceType="m5.xlarge",
            MinCount=WEB_REPLICAS + 1,
            MaxCount=WEB_REPLICAS + 1,
            SubnetId=subnet,
            # What EKS gives a managed node group's nodes: nodeadm joining the cluster, its label.
            UserData=nodeadm_user_data(sb.cluster_name, labels={"eks.amazonaws.com/nodegroup": "system"}),
            TagSpecifications=[
                {"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}
            ],
        )
        return sorted(str(i["InstanceId"]) for i in answer["Instances"])
    finally:
        ec2.close()


def _only_nodewright_profiles_hold_the_node_role(sb: Any) -> None:
    """The sandbox seeds a profile of the operator's for its node role (for EC2NodeClasses that name
    ``instanceProfile``); a stack-created node role is in no profile but Nodewright's: take it out."""
    iam = sb.aws_client("iam")
    try:
        iam.remove_role_from_instance_profile(
            InstanceProfileName=sb.aws.instance_profile_name, RoleName=sb.aws.node_role_name
        )
        iam.delete_instance_profile(InstanceProfileName=sb.aws.instance_profile_name)
    finally:
        iam.close()


def _inventory(sb: Any) -> dict[str, Any]:
    """What Nodewright has in EC2 and IAM for the cluster."""
    ec2, iam = sb.aws_client("ec2"), sb.aws_client("iam")
    try:
        instances = [
            i
            for r in ec2.describe_instances(Filters=[{"Name": "tag-key", "Values": [NODEPOOL_TAG]}])[
                "Reservations"
            ]
            for i in r["Instances"]
        ]
        templates = ec2.describe_launch_templates(
            Filters=[{"Name": "tag:karpenter.k8s.aws/cluster", "Values": [sb.cluster_name]}]
        )["LaunchTemplates"]
        profiles = iam.list_instance_profiles_for_role(RoleName=sb.aws.node_role_name)["InstanceProfiles"]
        return {
            "running": sorted(
                i["InstanceId"]
                for i in instances
                if i["State"]["Name"] not in ("shutting-down", "terminated")
            ),
            "templates": sorted(t["LaunchTemplateName"] for t in templates),
            "profiles": sorted(p["Arn"] for p in profiles),
        }
    finally:
        ec2.close()
        iam.close()


def _report(sb: Any) -> dict[str, Any]:
    """The removal's report as its SSM parameter holds it ({} when there is none)."""
    ssm = sb.aws_client("ssm")
    try:
        return dict(json.loads(ssm.get_parameter(Name=REPORT_PARAMETER)["Parameter"]["Value"]))
    except ssm.exceptions.ParameterNotFound:
        return {}
    finally:
        ssm.close()


@pytest.fixture(scope="module")
def destroyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Destroyed]:
    from sandbox import Sandbox

    directory = tmp_path_factory.mktemp("removal")
    with Sandbox(cluster_name=CLUSTER, boot_delay=0.2, init_delay=0.2) as sb:
        sb.apply_crds()
        admin = sb.admin_cluster()
        _only_nodewright_profiles_hold_the_node_role(sb)
        runtime = Runtime(sb, functions=("provisioner", "webhook"), schedules={"provisioner": TICK_SECONDS})
        runtime.start()
        try:
            (configuration,) = admin.list(VALIDATING_WEBHOOKS)
            url = urllib.parse.urlsplit(configuration["webhooks"][0]["clientConfig"]["url"])
            secret = url.path.strip("/").split("/")[0]
            wait_for(
                "the v1beta1 seeds applied through the conversion webhook",
                lambda: (
                    kubectl(sb.kubeconfig_path, "apply", "-f", SEED_NODECLASS, "-f", SEED_NODEPOOL).returncode
                    == 0
                ),
                TICK_SECONDS,
            )
            _web_and_pinned(admin)
            wait_for(
                "the web and pinned pods running on Nodewright's nodes",
                lambda: len(_running_on(admin, "web")) == WEB_REPLICAS and _running_on(admin, "pinned"),
                3 * TICK_SECONDS,
            )
        finally:
            runtime.stop()  # CloudFormation deletes the functions, rules and the URL before the removal
        before = {
            "nodes": _nodewright_nodes(admin),
            "nodeclaims": [c["metadata"]["name"] for c in admin.list(NODECLAIMS)],
            **_inventory(sb),
        }
        for made in ("running", "templates", "profiles"):
            assert before[made], before
        assert set(_running_on(admin, "web").values()) <= before["nodes"]
        assert len(before["nodes"]) >= 2, before
        system_instances = _system_node_group(sb)
        wait_for(
            "the node group's nodes ready",
            lambda: len(_ready_nodes_of(admin, system_instances)) == len(system_instances),
            30,
        )

        CloudFormation.answers = []
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), CloudFormation)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        response_url = (
            f"http://127.0.0.1:{server.server_address[1]}/cloudformation-custom-resource-response-useast1/"
            f"{urllib.parse.quote(STACK_ID, safe='')}%7CAutoscalerRemovalResource%7C6f0e3c52?"
            "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Date=20261205T013000Z&X-Amz-SignedHeaders=host&"
            f"X-Amz-Expires=7200&X-Amz-Credential=AKIAEXAMPLE%2F20261205%2Fus-east-1%2Fs3%2Faws4_request&"
            f"X-Amz-Signature={SIGNATURE}"
        )
        log_path = directory / "cleanup.log"
        cleanup_kubeconfig = _cleanup_identity(sb, directory)
        worker = Worker(
            FUNCTIONS["cleanup"],
            _cleanup_env(sb, cleanup_kubeconfig),
            log_path,
            "nodewright-cleanup",
        )
        reports = []
        try:
            for attempt in range(2):  # CloudFormation's Delete, then a retry of it
                done = worker.invoke(_delete_event(response_url))
                assert done is not None
                assert done.ok, done.error
                print(f"removal invocation {attempt + 1}: {done.seconds:.1f}s")
                reports.append(_report(sb))
        finally:
            worker.stop()
            server.shutdown()
            server.server_close()
        yield Destroyed(
            sb=sb,
            url_host=url.netloc,
            secret=secret,
            system_instances=system_instances,
            cleanup_kubeconfig=cleanup_kubeconfig,
            answers=list(CloudFormation.answers),
            log=log_path.read_text(),
            reports=reports,
            before=before,
        )


def test_cloudformation_is_answered_success_with_what_was_removed(destroyed: Destroyed) -> None:
    (path, headers, first), (_, _, retried) = destroyed.answers
    print(f"CloudFormation's reason: {first['Reason']}")
    assert path.startswith("/cloudformation-custom-resource-response-useast1/")
    assert headers.get("Content-Type", "") == ""  # the presigned URL is signed without one
    event = _delete_event("")
    for answer in (first, retried):
        assert answer["Status"] == "SUCCESS"
        assert (answer["StackId"], answer["RequestId"], answer["LogicalResourceId"]) == (
            event["StackId"],
            event["RequestId"],
            event["LogicalResourceId"],
        )
        assert answer["PhysicalResourceId"] == event["PhysicalResourceId"]
        assert "LEFT" not in answer["Reason"], answer["Reason"]
        assert f"Report: SSM parameter {REPORT_PARAMETER}" in answer["Reason"]
    assert f"{len(destroyed.before['nodes'])} node(s)" in first["Reason"], first["Reason"]
    assert "validatingwebhookconfiguration/nodewright-wakeup deleted" in first["Reason"]


def _every_listable_object(admin: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """(resource path, object) for every object of every resource the API server lists, in every
    served version of every group."""
    versions = ["/api/v1"]
    for group in admin.request("GET", "/apis")["groups"]:
        versions += [f"/apis/{v['groupVersion']}" for v in group["versions"]]
    for base in versions:
        for resource in admin.request("GET", base)["resources"]:
            if "/" in resource["name"] or "list" not in resource.get("verbs", []):
                continue
            path = f"{base}/{resource['name']}"
            for item in admin.request("GET", path).get("items") or []:
                yield path, item


def test_no_object_in_the_cluster_names_the_stacks_url(destroyed: Destroyed) -> None:
    admin = destroyed.sb.admin_cluster()
    seen = 0
    for path, item in _every_listable_object(admin):
        seen += 1
        text = json.dumps(item)
        name = (item.get("metadata") or {}).get("name")
        assert destroyed.url_host not in text, f"{path} {name} names the function URL"
        assert destroyed.secret not in text, f"{path} {name} holds the URL's secret"
    assert seen > 50, "the search saw the cluster's objects"
    assert not admin.list(VALIDATING_WEBHOOKS)
    for crd in ("nodepools.karpenter.sh", "ec2nodeclasses.karpenter.k8s.aws"):
        spec = admin.request("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}")["spec"]
        assert spec["conversion"] == {"strategy": "None"}
        assert [(v["name"], v["served"], v["storage"]) for v in spec["versions"]] == [("v1", True, True)]


def test_the_crds_serve_v1_and_refuse_v1beta1_without_a_webhook_error(destroyed: Destroyed) -> None:
    sb = destroyed.sb
    pools = kubectl(sb.kubeconfig_path, "get", "nodepools", "-o", "json")
    assert pools.returncode == 0, pools.stderr
    (pool,) = json.loads(pools.stdout)["items"]  # the v1beta1 seed, stored as v1, kept
    assert (pool["apiVersion"], pool["metadata"]["name"]) == ("karpenter.sh/v1", "default")
    classes = kubectl(
        sb.kubeconfig_path, "get", "ec2nodeclasses.v1.karpenter.k8s.aws", "default", "-o", "json"
    )
    assert classes.returncode == 0, classes.stderr
    assert json.loads(classes.stdout)["spec"]["role"] == sb.aws.node_role_name
    for resource in ("nodepools.v1beta1.karpenter.sh", "ec2nodeclasses.v1beta1.karpenter.k8s.aws"):
        refused = kubectl(sb.kubeconfig_path, "get", resource)
        assert refused.returncode == 1
        # kubectl says the first with fresh discovery, the second while its cache still lists v1beta1.
        assert any(
            plain in refused.stderr
            for plain in (
                "the server doesn't have a resource type",
                "the server could not find the requested resource",
            )
        ), refused.stderr
        assert "conversion webhook" not in refused.stderr
        assert destroyed.secret not in refused.stderr
        assert destroyed.url_host not in refused.stderr
    raw = kubectl(sb.kubeconfig_path, "get", "--raw", "/apis/karpenter.sh/v1beta1/nodepools")
    assert raw.returncode == 1
    assert "NotFound" in raw.stderr, raw.stderr


def test_the_nodes_were_drained_under_the_pdb_and_every_nodewright_instance_terminated(
    destroyed: Destroyed,
) -> None:
    sb = destroyed.sb
    admin = sb.admin_cluster()
    first = destroyed.reports[0]
    assert sorted(first["nodes"]) == sorted(destroyed.before["nodes"])
    assert sorted(first["nodeClaims"]) == sorted(destroyed.before["nodeclaims"])
    # Every pod left through the Eviction API, the PDB's one at a time included; none at a deadline.
    assert first["podsEvicted"] >= WEB_REPLICAS + 1, first
    assert first["podsDeletedAtDeadline"] == 0, first
    assert not admin.list(NODECLAIMS)
    assert not _nodewright_nodes(admin)
    assert not [
        n for n in admin.list(NODES) if "karpenter.sh/termination" in n["metadata"].get("finalizers", [])
    ]
    node_group = _ready_nodes_of(admin, destroyed.system_instances)
    wait_for(
        "the workload running on the node group's nodes",
        lambda: (
            len(_running_on(admin, "web")) == WEB_REPLICAS
            and set(_running_on(admin, "web").values()) | set(_running_on(admin, "pinned").values())
            <= node_group
            and _running_on(admin, "pinned")
        ),
        60,
    )
    after = _inventory(sb)
    assert after["running"] == [], after
    ec2 = sb.aws_client("ec2")
    try:
        found = ec2.describe_instances(InstanceIds=destroyed.system_instances)["Reservations"]
        states = {i["State"]["Name"] for r in found for i in r["Instances"]}
        assert states == {"running"}  # not Nodewright's: untouched
    finally:
        ec2.close()


def test_no_launch_template_or_instance_profile_is_left_and_the_node_role_can_be_deleted(
    destroyed: Destroyed,
) -> None:
    sb = destroyed.sb
    after = _inventory(sb)
    assert after["templates"] == [], after
    assert after["profiles"] == [], after
    assert sorted(destroyed.reports[0]["launchTemplatesDeleted"]) == destroyed.before["templates"]
    iam = sb.aws_client("iam")
    try:
        left = iam.list_instance_profiles(PathPrefix=f"/nodewright/{sb.region}/{sb.cluster_name}/")
        assert left["InstanceProfiles"] == []
        # What CloudFormation does next with a created node role: no DeleteConflict.
        role = sb.aws.node_role_name
        for policy in iam.list_attached_role_policies(RoleName=role)["AttachedPolicies"]:
            iam.detach_role_policy(RoleName=role, PolicyArn=policy["PolicyArn"])
        for name in iam.list_role_policies(RoleName=role)["PolicyNames"]:
            iam.delete_role_policy(RoleName=role, PolicyName=name)
        iam.delete_role(RoleName=role)
    finally:
        iam.close()


def test_the_report_outlives_the_stack_and_a_retried_delete_finds_nothing_left(destroyed: Destroyed) -> None:
    first, retried = destroyed.reports
    assert first["complete"] is True, first
    assert (first["left"], first["problems"]) == ([], [])
    assert (first["stack"], first["cluster"]) == (STACK_ID, CLUSTER)
    assert "validatingwebhookconfiguration/nodewright-wakeup deleted" in first["webhooks"]
    # Every instance went through its node's termination; the sweep after the drain found none.
    assert sorted(first["instancesTerminated"]) == destroyed.before["running"]
    assert first["instancesWithoutANode"] == []
    assert retried["complete"] is True
    assert "validatingwebhookconfiguration/nodewright-wakeup not found" in retried["webhooks"]
    assert (retried["nodes"], retried["nodeClaims"], retried["instancesTerminated"]) == ([], [], [])
    assert (retried["launchTemplatesDeleted"], retried["instanceProfilesDeleted"]) == ([], [])


def test_the_cloudformation_event_is_never_logged_whole(destroyed: Destroyed) -> None:
    log = destroyed.log
    assert '"RequestType": "Delete"' in log or '"RequestType":"Delete"' in log, log[:2000]
    for leak in (
        SIGNATURE,
        "X-Amz-Signature",
        "X-Amz-Credential",
        "ResponseURL",
        "cloudformation-custom-resource-response",
    ):
        assert leak not in log, leak


def test_the_removal_acted_as_its_own_group_which_can_only_take_the_webhooks_out(
    destroyed: Destroyed,
) -> None:
    kubeconfig = Path(destroyed.cleanup_kubeconfig)
    for allowed, request in (
        ("yes", ("delete", "validatingwebhookconfigurations/nodewright-wakeup")),
        ("yes", ("patch", "customresourcedefinitions.apiextensions.k8s.io/nodepools.karpenter.sh")),
        ("yes", ("create", "pods", "--subresource=eviction", "--all-namespaces")),
        ("no", ("create", "validatingwebhookconfigurations")),
        ("no", ("delete", "validatingwebhookconfigurations/other")),
        ("no", ("create", "customresourcedefinitions.apiextensions.k8s.io")),
        ("no", ("delete", "customresourcedefinitions.apiextensions.k8s.io/nodepools.karpenter.sh")),
        ("no", ("create", "nodeclaims.karpenter.sh")),
        ("no", ("list", "secrets")),
    ):
        answer = kubectl(kubeconfig, "auth", "can-i", *request)
        assert answer.stdout.strip() == allowed, (request, answer.stdout, answer.stderr)
