"""The issue's scenario: inflate, instances launched straight in moto, nodes register, pods run; an
instance ends, its node goes and its pods come back Pending."""

from __future__ import annotations

import time

import pytest
from waiting import wait_for

from sandbox import Sandbox
from sandbox.aws.eks_amis import nodeadm_user_data
from sandbox.simulators.kube import Kube, core, group

pytestmark = [pytest.mark.e2e]

INFLATE = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "inflate", "namespace": "default"},
    "spec": {
        "replicas": 10,
        "selector": {"matchLabels": {"app": "inflate"}},
        "template": {
            "metadata": {"labels": {"app": "inflate"}},
            "spec": {
                "terminationGracePeriodSeconds": 0,
                "containers": [
                    {
                        "name": "inflate",
                        "image": "public.ecr.aws/eks-distro/kubernetes/pause:3.7",
                        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                    }
                ],
            },
        },
    },
}


def phases(kube: Kube) -> dict[str, int]:
    pods, _ = kube.list(core("pods", "default"), labelSelector="app=inflate")
    counts: dict[str, int] = {}
    for pod in pods:
        if not pod["metadata"].get("deletionTimestamp"):
            phase = pod["status"].get("phase", "Pending")
            counts[phase] = counts.get(phase, 0) + 1
    return counts


def scheduling_verdicts(kube: Kube, pods: list[dict]) -> list[tuple[str, str]]:
    """(reason, message) of each pod's PodScheduled condition, read fresh from the API server."""
    verdicts = []
    for pod in pods:
        status = kube.get(core("pods", "default", pod["metadata"]["name"]))["status"]
        condition = next((c for c in status.get("conditions") or [] if c["type"] == "PodScheduled"), {})
        verdicts.append((condition.get("reason", ""), condition.get("message", "")))
    return verdicts


def test_inflate_runs_on_instances_launched_in_moto_and_returns_pending_when_one_ends() -> None:
    with Sandbox(cluster_name="scenario", boot_delay=1.0) as sb:
        kube = Kube(sb.api_client())
        ec2 = sb.aws_client("ec2")
        try:
            kube.create(group("apps/v1", "deployments", "default"), INFLATE)
            wait_for("10 pending pods", lambda: phases(kube) == {"Pending": 10})
            pods, _ = kube.list(core("pods", "default"), labelSelector="app=inflate")
            wait_for(
                "the scheduler to say why",
                lambda: all(reason == "Unschedulable" for reason, _ in scheduling_verdicts(kube, pods)),
            )

            instance_ids = []
            for zone in ("us-east-1a", "us-east-1b"):
                instance_ids.append(
                    ec2.run_instances(
                        ImageId=sb.aws.images["al2023/x86_64"],
                        MinCount=1,
                        MaxCount=1,
                        InstanceType="m5.2xlarge",  # 8 vCPU: 7 inflate pods fit after kube-reserved
                        SubnetId=sb.aws.subnets[zone],
                        UserData=nodeadm_user_data("scenario"),  # a self-managed node's bootstrap
                        TagSpecifications=[
                            {
                                "ResourceType": "instance",
                                "Tags": [{"Key": "kubernetes.io/cluster/scenario", "Value": "owned"}],
                            }
                        ],
                    )["Instances"][0]["InstanceId"]
                )
            launched = time.monotonic()
            wait_for("10 running pods", lambda: phases(kube) == {"Running": 10})
            assert time.monotonic() - launched >= 1.0  # the boot delay is honoured
            nodes, _ = kube.list(core("nodes"))
            assert sorted(n["spec"]["providerID"].rsplit("/", 1)[1] for n in nodes) == sorted(instance_ids)
            assert {n["metadata"]["labels"]["node.kubernetes.io/instance-type"] for n in nodes} == {
                "m5.2xlarge"
            }
            doomed = next(n for n in nodes if n["spec"]["providerID"].endswith(instance_ids[0]))
            doomed_pods = [
                p["metadata"]["name"]
                for p in kube.list(
                    core("pods", "default"), fieldSelector=f"spec.nodeName={doomed['metadata']['name']}"
                )[0]
            ]
            assert doomed_pods

            ec2.terminate_instances(InstanceIds=[instance_ids[0]])
            wait_for(
                "the node to go",
                lambda: (
                    [n["metadata"]["name"] for n in kube.list(core("nodes"))[0]]
                    == [n["metadata"]["name"] for n in nodes if n is not doomed]
                ),
            )
            # The surviving node takes 7; the other 3 wait, Unschedulable for lack of cpu.
            wait_for("7 running, 3 pending", lambda: phases(kube) == {"Running": 7, "Pending": 3})
            pods, _ = kube.list(core("pods", "default"), labelSelector="app=inflate")
            pending = [p for p in pods if p["status"].get("phase") == "Pending"]
            assert not {p["metadata"]["name"] for p in pending} & set(doomed_pods)  # new pods, not the old
            assert all(p["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet" for p in pending)
            wait_for(
                "the real scheduler's message",
                lambda: (
                    {message for _, message in scheduling_verdicts(kube, pending)}
                    == {"0/1 nodes are available: 1 Insufficient cpu."}
                ),
            )
        finally:
            ec2.close()
