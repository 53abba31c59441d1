"""One provisioning pass and one disruption pass over a big cluster: seconds, peak RSS, API requests.

``nodewright bench pass --nodes 5000 --pods 50000``: the API emulator holds ``--nodes`` registered
nodes with their NodeClaims (one NodePool), ``--pods`` running pods spread over them (ReplicaSet
pods with requests, tolerations, the service-account token volume, status and managedFields, as
kube-apiserver stores them) and
``--pending`` pending pods. Each pass then runs in a process of its own, as in its Lambda container:
the function's environment and identity, the real client (paginated lists of 500 with
``continue``, the token bucket), moto behind the sandbox's IAM enforcement for the AWS side:

* provisioning: ``provisioning.provision`` — observe, lifecycle, termination, garbage collection,
  plan and launch for the pending pods;
* disruption: ``disruption.flow.reconcile`` over one observed ``World`` — expiration, emptiness,
  drift and the consolidation search over every node, with the deployed function's write
  deadline (its timeout less the margin), which bounds the search.

Each process makes two passes, as a warm container makes one a minute: the first is a cold
container's (the catalog fetched from EC2, and over a cluster no pass has seen: the disruption pass
writes NodeClaims' status (lastPodEventTime, Consolidatable) and pod-event digests, and says why
nodes stay, each for its few seconds, the rest left to the next passes), the second the steady
state — the ``…PassSeconds`` figures: for the disruption pass, an unchanged cluster whose last search
found nothing, so consolidation is skipped as Karpenter skips it (``disruption.consolidated``). The
disruption process then deletes one bound pod and makes a third pass (``disruptionChangedPass…``):
the cluster has changed, so it searches. The cluster has been up for an hour (its nodes past
consolidation's waits). Per pass: wall seconds, CPU
seconds of the function's process (what is the product's own; the rest is waiting for the emulator,
which shares this machine), API requests its client made; per process, peak RSS (VmHWM, imports
included: what Lambda's memory limit holds; not ``ru_maxrss``, which Linux carries over from the
forked parent). Where a pass's wall time goes besides its CPU: ``…ApiServerSeconds`` in API server
requests (the rate limiter's waits included, also given apart) and ``…AwsSeconds`` in AWS calls,
each summed over the pass's threads (the first passes' too). Goal (issue 30): each pass ≤ 20 s,
within the stack's memory (512 MB provisioner, 1 GB disruption).
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from bench._report import print_figures, save

GOAL_SECONDS = 20.0
# The function whose pass each is, and so its memory (nodewright/spec/deployment.py FUNCTIONS).
FUNCTION = {"provisioning": "provisioner", "disruption": "disruption"}
INSTANCE_TYPE = "m5.2xlarge"  # 8 vCPU, 32 GiB: ten 500m / 1 GiB pods use ~60 % of it
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
INSTANCE_BATCH = 10
# The projected volume kube-apiserver's ServiceAccount admission mounts into every pod.
SERVICE_ACCOUNT_TOKEN_VOLUME = {
    "name": "kube-api-access-x7k2p",
    "projected": {
        "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {
                "downwardAPI": {
                    "items": [
                        {
                            "path": "namespace",
                            "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                        }
                    ]
                }
            },
        ],
        "defaultMode": 420,
    },
}

# Run in the pass's own process: its settings from the environment, as a Lambda container reads them.
CHILD = r"""
import json, resource, sys, time
which = sys.argv[1]
from nodewright.context import ContainerContext
from nodewright.observability import logger, metrics
container = ContainerContext(logger=logger(), metrics=metrics())
ctx = container.get()
limiter = ctx.cluster.limiter

def high_water_mib():
    # VmHWM: this process's own peak RSS. Not ru_maxrss: Linux keeps across execve the peak of
    # the forked parent's pages, which would count the bench's API emulator.
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime

profile_dir = sys.argv[3] if len(sys.argv) > 3 else ""

# Where the wall time goes besides the pass's own CPU: waiting for the API server (every request,
# the client's rate limiter included, which it also counts apart) and for AWS (every SDK call).
# Summed over threads: observe reads its capacity lists in parallel.
import botocore.client
from nodewright.cluster.client import Cluster
waiting = {"api": 0.0, "aws": 0.0}

def timed(owner, name, key):
    original = getattr(owner, name)
    def wrapper(*args, **kwargs):
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            waiting[key] += time.perf_counter() - started
    setattr(owner, name, wrapper)

timed(Cluster, "_request_once", "api")
timed(botocore.client.BaseClient, "_make_api_call", "aws")

def one_pass(label):
    profiler = None
    if profile_dir:
        import cProfile
        profiler = cProfile.Profile(time.process_time)  # CPU seconds: a loaded machine's waits left out
        profiler.enable()
    requests, cpu_before, started = limiter.requests, cpu(), time.perf_counter()
    api_before, aws_before, limited_before = waiting["api"], waiting["aws"], limiter.waited_seconds
    if which == "provisioning":
        from nodewright.provisioning import provision
        report = provision(ctx)
        said = {"nodeClaimsCreated": len(report.created), "pendingPods": report.pending_pods}
    else:
        from nodewright.disruption.flow import WRITE_MARGIN_SECONDS, reconcile
        from nodewright.spec.deployment import FUNCTIONS
        from nodewright.state.world import observe
        # As the deployed function's first pass: it may write until its timeout less the margin.
        timeout = FUNCTIONS["disruption"].timeout_seconds
        write_deadline = ctx.clock.monotonic() + timeout - WRITE_MARGIN_SECONDS
        world = observe(ctx)
        lease = ctx.cluster.writer_lease("bench-pass", duration_seconds=60)
        report = reconcile(ctx, world, lease=lease, write_deadline=write_deadline)
        said = {
            "commands": len(report.commands),
            "nodes": len(world.nodes),
            "consolidation": report.consolidation,
            "held": len(report.held),
            "decisionSeconds": report.decision_seconds,
        }
        del world
    figures = {
        "seconds": time.perf_counter() - started,
        "cpuSeconds": cpu() - cpu_before,
        "apiRequests": limiter.requests - requests,
        "apiServerSeconds": waiting["api"] - api_before,
        "limiterWaitedSeconds": limiter.waited_seconds - limited_before,
        "awsSeconds": waiting["aws"] - aws_before,
        **said,
    }
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(f"{profile_dir}/{which}-{label}.prof")
    return figures

imported = high_water_mib()
first = one_pass("first")
second = one_pass("second")
changed = None
if which == "disruption":
    # A pod of the workload goes (scaled down): the cluster has changed, so this pass searches.
    ctx.cluster.delete_pod("default", sys.argv[2], grace_period_seconds=0)
    changed = one_pass("changed")
print(json.dumps({
    "first": first,
    "second": second,
    "changed": changed,
    "peakRssMiB": high_water_mib(),
    "importedRssMiB": imported,
    "limiterWaitedSeconds": limiter.waited_seconds,
}), file=sys.__stderr__)
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nodes", type=int, default=5000, help="registered nodes (default 5000)")
    parser.add_argument(
        "--pods", type=int, default=50000, help="running pods spread over them (default 50000)"
    )
    parser.add_argument(
        "--pending", type=int, default=100, help="pending pods for the provisioner (default 100)"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument(
        "--profile",
        metavar="DIR",
        help="also profile each pass with cProfile into DIR/<pass>-<first|second|changed>.prof "
        "(its figures then include the profiler's overhead: for finding hot spots, not for the table)",
    )


def _since() -> str:
    """When the cluster's nodes and pods came up: an hour ago, as in a cluster that has been running
    (nodes initialized and pods bound just now would make the second pass the first one that may
    consolidate them, not the steady state)."""
    from datetime import UTC, datetime, timedelta

    from nodewright.cluster.objects import format_time

    return format_time(datetime.now(UTC) - timedelta(hours=1))


def _load(sb: Any, nodes: int, pods: int, pending: int) -> None:
    """The cluster, written into the emulator's store: one object of each kind goes through the API
    (admission, defaults, managedFields), the rest are copies of it under their own names, so the
    lists the passes read are what kube-apiserver would serve for a cluster that size."""
    from nodewright.api import labels
    from nodewright.cloud.provider import TAG_NODECLAIM
    from nodewright.cluster.resources import EC2NODECLASSES, NODECLAIMS, NODEPOOLS, NODES, PODS

    from sandbox.scenarios.workloads import REPLICASETS, nodeclass, nodepool

    admin = sb.admin_cluster()
    admin.create(EC2NODECLASSES, nodeclass(sb))
    requirements = [
        {"key": labels.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
        {"key": labels.INSTANCE_TYPE, "operator": "In", "values": [INSTANCE_TYPE]},
    ]
    admin.create(NODEPOOLS, nodepool("big", requirements))
    replicaset = admin.create(
        REPLICASETS,
        {
            "metadata": {"name": "web-5d9c7", "namespace": "default", "labels": {"app": "web"}},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "web", "image": "public.ecr.aws/nginx/nginx:1.27"}]},
                },
            },
        },
        namespace="default",
    )
    store = sb.apiserver.store
    since = _since()
    claim_template, node_template = _node_objects(sb, admin, since)
    pod_template = admin.create(PODS, _pod("template", replicaset), namespace="default")
    admin.delete(PODS, "template", namespace="default", grace_period_seconds=0)
    instances = _instances(sb, nodes)
    for i in range(nodes):
        zone = ZONES[i % len(ZONES)]
        instance = instances[zone].pop()
        name = f"big-{i:05d}"
        sb.iam.world._backend("ec2", sb.region).create_tags([instance], {TAG_NODECLAIM: name})
        node_name = f"ip-10-{i // 65536 % 256}-{i // 256 % 256}-{i % 256}.ec2.internal"
        claim = copy.deepcopy(claim_template)
        claim["metadata"].update(name=name, uid=str(uuid.uuid4()))
        claim["metadata"]["labels"][labels.ZONE] = zone
        claim["status"].update(
            providerID=f"aws:///{zone}/{instance}", nodeName=node_name, imageID=sb.aws.images["al2023/x86_64"]
        )
        store.write(_key(NODECLAIMS), claim)
        node = copy.deepcopy(node_template)
        node["metadata"].update(name=node_name, uid=str(uuid.uuid4()))
        node["metadata"]["labels"].update(
            {labels.ZONE: zone, "kubernetes.io/hostname": node_name, "karpenter.sh/nodeclaim": name}
        )
        node["spec"]["providerID"] = f"aws:///{zone}/{instance}"
        node["status"]["addresses"] = [
            {"type": "InternalIP", "address": f"10.{i // 65536 % 256}.{i // 256 % 256}.{i % 256}"},
            {"type": "Hostname", "address": node_name},
        ]
        store.write(_key(NODES), node)
    node_names = [f"ip-10-{i // 65536 % 256}-{i // 256 % 256}-{i % 256}.ec2.internal" for i in range(nodes)]
    for i in range(pods + pending):
        pod = copy.deepcopy(pod_template)
        pod["metadata"].update(name=_pod_name(i), uid=str(uuid.uuid4()), creationTimestamp=since)
        if i < pods:
            pod["spec"]["nodeName"] = node_names[i % nodes]
            pod["status"] = _running_status(since, i)
        else:
            pod["status"] = {
                "phase": "Pending",
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": "0/1 nodes are available: 1 Insufficient cpu.",
                        "lastTransitionTime": since,
                    }
                ],
            }
        store.write(_key(PODS), pod)


def _pod_name(i: int) -> str:
    """The name of the bench's ``i``-th pod (the first ``--pods`` are bound, ``i`` to node ``i % nodes``)."""
    return f"web-5d9c7-{i:06x}"


def _instances(sb: Any, nodes: int) -> dict[str, list[str]]:
    """EC2 instances for the NodeClaims, per zone (in moto, tagged for the cluster as a launch tags
    them): the provisioner's garbage collection deletes a NodeClaim whose instance is gone, and
    terminates an instance of the cluster that no NodeClaim records."""
    ec2 = sb.aws_client("ec2")
    by_zone: dict[str, list[str]] = {zone: [] for zone in ZONES}
    try:
        for index, zone in enumerate(ZONES):
            left = len(range(index, nodes, len(ZONES)))
            while left > 0:
                # In small batches, one reservation each, as launches of a few NodeClaims make them:
                # moto pages DescribeInstances by 100 reservations, and a page of all 5,000
                # instances took it past the client's 30 s read timeout on a loaded machine (the
                # retries ran beside it); one RunInstances of 700 broke its subnet address generator.
                count, left = min(left, INSTANCE_BATCH), left - INSTANCE_BATCH
                by_zone[zone] += _run_instances(sb, ec2, zone, count)
    finally:
        ec2.close()
    return by_zone


def _run_instances(sb: Any, ec2: Any, zone: str, count: int) -> list[str]:
    from nodewright.cloud.provider import TAG_CLUSTER_NAME

    reply = ec2.run_instances(
        ImageId=sb.aws.images["al2023/x86_64"],
        InstanceType=INSTANCE_TYPE,
        MinCount=count,
        MaxCount=count,
        SubnetId=sb.aws.subnets[zone],
        TagSpecifications=[
            {
                "ResourceType": "instance",
                "Tags": [
                    {"Key": TAG_CLUSTER_NAME, "Value": sb.cluster_name},
                    {"Key": f"kubernetes.io/cluster/{sb.cluster_name}", "Value": "owned"},
                ],
            }
        ],
    )
    return [i["InstanceId"] for i in reply["Instances"]]


def _key(resource: Any) -> tuple[str, str]:
    return (resource.group, resource.plural)


def _pod(name: str, replicaset: dict[str, Any]) -> dict[str, Any]:
    meta = replicaset["metadata"]
    return {
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {"app": "web", "pod-template-hash": "5d9c7"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "containers": [
                {
                    "name": "web",
                    "image": "public.ecr.aws/nginx/nginx:1.27",
                    "ports": [{"containerPort": 80, "protocol": "TCP"}],
                    "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}},
                    "env": [{"name": "MODE", "value": "production"}],
                    "volumeMounts": [
                        {
                            "name": "kube-api-access-x7k2p",
                            "readOnly": True,
                            "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                        }
                    ],
                }
            ],
            # What kube-apiserver's ServiceAccount admission adds to every pod (the emulator does not).
            "volumes": [SERVICE_ACCOUNT_TOKEN_VOLUME],
        },
    }


def _running_status(now: str, i: int) -> dict[str, Any]:
    return {
        "phase": "Running",
        "conditions": [
            {"type": t, "status": "True", "lastTransitionTime": now}
            for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
        ],
        "hostIP": "10.0.0.1",
        "podIP": f"10.1.{i // 256 % 256}.{i % 256}",
        "startTime": now,
        "qosClass": "Burstable",
        "containerStatuses": [
            {
                "name": "web",
                "ready": True,
                "restartCount": 0,
                "started": True,
                "image": "public.ecr.aws/nginx/nginx:1.27",
                "imageID": "public.ecr.aws/nginx/nginx@sha256:" + "0" * 64,
                "containerID": f"containerd://{uuid.uuid4().hex}{uuid.uuid4().hex}",
                "state": {"running": {"startedAt": now}},
            }
        ],
    }


def _node_objects(sb: Any, admin: Any, since: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A registered, initialized NodeClaim and its Node, through the API (then deleted again), up
    ``since`` (the kubelet's heartbeat is now)."""
    from nodewright.api import labels
    from nodewright.cluster.objects import now_rfc3339
    from nodewright.cluster.resources import NODECLAIMS, NODES

    claim_labels = {
        "karpenter.sh/nodepool": "big",
        labels.CAPACITY_TYPE: "on-demand",
        labels.INSTANCE_TYPE: INSTANCE_TYPE,
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux",
        "karpenter.k8s.aws/instance-family": "m5",
        "karpenter.k8s.aws/instance-cpu": "8",
        "karpenter.k8s.aws/instance-memory": "32768",
        "node.kubernetes.io/instance-type": INSTANCE_TYPE,
    }
    claim = admin.create(
        NODECLAIMS,
        {
            "metadata": {
                "name": "template",
                "labels": claim_labels,
                "finalizers": [labels.TERMINATION_FINALIZER],
            },
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [
                    {"key": labels.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
                    {"key": labels.INSTANCE_TYPE, "operator": "In", "values": [INSTANCE_TYPE]},
                ],
                "resources": {"requests": {"cpu": "5", "memory": "10Gi", "pods": "10"}},
            },
        },
    )
    capacity = {"cpu": "8", "memory": "32386544Ki", "pods": "58", "ephemeral-storage": "20959212Ki"}
    allocatable = {"cpu": "7910m", "memory": "31369712Ki", "pods": "58", "ephemeral-storage": "18242267924"}
    claim["status"] = {
        "capacity": capacity,
        "allocatable": allocatable,
        "conditions": [
            {"type": t, "status": "True", "reason": t, "message": "", "lastTransitionTime": since}
            for t in ("Launched", "Registered", "Initialized", "Ready")
        ],
    }
    admin.remove_finalizer(NODECLAIMS, "template", labels.TERMINATION_FINALIZER)
    admin.delete(NODECLAIMS, "template")
    node = admin.create(
        NODES,
        {
            "metadata": {
                "name": "template",
                "labels": {
                    **claim_labels,
                    "karpenter.sh/registered": "true",
                    "karpenter.sh/initialized": "true",
                },
            },
            "spec": {},
        },
    )
    node["status"] = {
        "capacity": capacity,
        "allocatable": allocatable,
        "conditions": [
            {
                "type": t,
                "status": s,
                "reason": f"Kubelet{t}",
                "message": "",
                "lastHeartbeatTime": now_rfc3339(),
                "lastTransitionTime": since,
            }
            for t, s in (
                ("MemoryPressure", "False"),
                ("DiskPressure", "False"),
                ("PIDPressure", "False"),
                ("Ready", "True"),
            )
        ],
        "nodeInfo": {
            "architecture": "amd64",
            "containerRuntimeVersion": "containerd://1.7.27",
            "kernelVersion": "6.1.132-147.221.amzn2023.x86_64",
            "kubeletVersion": "v1.36.0-eks-1234567",
            "kubeProxyVersion": "",
            "operatingSystem": "linux",
            "osImage": "Amazon Linux 2023.7.20250414",
            "bootID": str(uuid.uuid4()),
            "machineID": uuid.uuid4().hex,
            "systemUUID": str(uuid.uuid4()),
        },
        "images": [
            {
                "names": [f"602401143452.dkr.ecr.us-east-1.amazonaws.com/eks/image-{k}@sha256:{'a' * 64}"],
                "sizeBytes": 10_000_000 + k,
            }
            for k in range(12)
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
    }
    admin.delete(NODES, "template")
    return claim, node


def _pass(sb: Any, runtime: Any, which: str, profile: str | None = None) -> dict[str, Any]:
    name = FUNCTION[which]
    env = runtime.function_env(name)
    sb.iam.learn(env, name)
    done = subprocess.run(
        [sys.executable, "-c", CHILD, which, _pod_name(0), str(Path(profile).resolve()) if profile else ""],
        env={
            **env,
            "POWERTOOLS_LOG_LEVEL": "WARNING",
            "POWERTOOLS_METRICS_DISABLED": "true",
        },
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    lines = [line for line in done.stderr.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"the {which} pass failed:\n{done.stderr[-3000:]}")
    return json.loads(lines[-1])


def _index_moto_tags() -> None:
    """moto finds an EC2 resource's tags by matching every tag of every resource against the id
    (``TagBackend.describe_tags``), once per instance it describes: DescribeInstances over 5,000
    instances is 5,000 x 20,000 regular-expression matches, minutes of the emulator's CPU on the
    machine the passes run on, where EC2 answers in seconds. In this bench's process (the moto
    server's), a resource's tags are read from moto's own dict by id instead: the same tags in the
    same order, so every answer is unchanged."""
    from moto.ec2.models.core import TaggedEC2Resource
    from moto.ec2.utils import EC2_PREFIX_TO_RESOURCE, get_prefix

    def get_tags(self: Any) -> list[dict[str, str]]:
        if not self.id:
            return []
        kind = EC2_PREFIX_TO_RESOURCE.get(get_prefix(self.id), "")
        tags = self.ec2_backend.tags.get(self.id) or {}
        return [
            {"resource_id": self.id, "key": k, "value": v, "resource_type": kind} for k, v in tags.items()
        ]

    TaggedEC2Resource.get_tags = get_tags  # type: ignore[method-assign]


def run(args: argparse.Namespace) -> int:
    from nodewright.spec.deployment import FUNCTIONS

    from sandbox import Sandbox
    from sandbox.runtime.stack import Runtime

    _index_moto_tags()
    with Sandbox(cluster_name="bench-pass", simulators=False) as sb:
        sb.apply_crds()
        started = time.perf_counter()
        _load(sb, args.nodes, args.pods, args.pending)
        load_seconds = time.perf_counter() - started
        runtime = Runtime(sb, functions=("provisioner", "disruption"), schedules={}, wakeup=False)
        if args.profile:
            Path(args.profile).mkdir(parents=True, exist_ok=True)
        provisioning = _pass(sb, runtime, "provisioning", args.profile)
        disruption = _pass(sb, runtime, "disruption", args.profile)
    limits = {
        "provisioning": FUNCTIONS["provisioner"].memory_mb,
        "disruption": FUNCTIONS["disruption"].memory_mb,
    }
    figures: dict[str, Any] = {"nodes": args.nodes, "pods": args.pods, "pendingPods": args.pending}
    for which, measured in (("provisioning", provisioning), ("disruption", disruption)):
        first, second = measured["first"], measured["second"]
        figures.update(
            {
                f"{which}PassSeconds": round(second["seconds"], 2),
                f"{which}PassCpuSeconds": round(second["cpuSeconds"], 2),
                f"{which}ApiRequests": second["apiRequests"],
                # The steady pass's wall time besides its CPU: in API server requests (the rate
                # limiter's waits included, and apart) and in AWS calls, summed over threads.
                f"{which}PassApiServerSeconds": round(second["apiServerSeconds"], 2),
                f"{which}PassLimiterWaitedSeconds": round(second["limiterWaitedSeconds"], 2),
                f"{which}PassAwsSeconds": round(second["awsSeconds"], 2),
                f"{which}FirstPassSeconds": round(first["seconds"], 2),
                f"{which}FirstPassCpuSeconds": round(first["cpuSeconds"], 2),
                f"{which}FirstPassApiRequests": first["apiRequests"],
                f"{which}FirstPassApiServerSeconds": round(first["apiServerSeconds"], 2),
                f"{which}FirstPassAwsSeconds": round(first["awsSeconds"], 2),
                f"{which}PeakRssMiB": round(measured["peakRssMiB"]),
                f"{which}ImportedRssMiB": round(measured["importedRssMiB"]),
                f"{which}MemoryMiB": limits[which],
            }
        )
    changed = disruption["changed"]
    figures.update(
        {
            "disruptionChangedPassSeconds": round(changed["seconds"], 2),
            "disruptionChangedPassCpuSeconds": round(changed["cpuSeconds"], 2),
            "disruptionChangedPassApiRequests": changed["apiRequests"],
            "disruptionChangedPassApiServerSeconds": round(changed["apiServerSeconds"], 2),
            "disruptionChangedPassAwsSeconds": round(changed["awsSeconds"], 2),
            "disruptionFirstPassConsolidation": disruption["first"]["consolidation"],
            "disruptionPassConsolidation": disruption["second"]["consolidation"],
            "disruptionChangedPassConsolidation": changed["consolidation"],
        }
    )
    figures["provisioningNodeClaimsCreated"] = provisioning["first"]["nodeClaimsCreated"]
    figures["disruptionCommands"] = sum(disruption[p]["commands"] for p in ("first", "second", "changed"))
    figures["peakRssMiB"] = round(max(provisioning["peakRssMiB"], disruption["peakRssMiB"]))
    figures["apiRequests"] = figures["provisioningApiRequests"] + figures["disruptionApiRequests"]
    figures["loadSeconds"] = round(load_seconds, 1)
    print_figures(figures, args.json, sort_keys=False)
    save(args, figures)
    ok = (
        figures["provisioningPassSeconds"] <= GOAL_SECONDS
        and figures["disruptionPassSeconds"] <= GOAL_SECONDS
        and figures["disruptionChangedPassSeconds"] <= GOAL_SECONDS
        and provisioning["peakRssMiB"] <= limits["provisioning"]
        and disruption["peakRssMiB"] <= limits["disruption"]
    )
    return 0 if ok else 1
