"""Interruption handler: messages/s in batches of 10, and message received → node cordoned + evictions issued.

Runs the real ``functions/interruption`` handler (Powertools BatchProcessor, idempotency on the
sandbox's DynamoDB table) against the sandbox: moto server, the API emulator and its kubelet.

* throughput: ``--messages`` messages in SQS batches of 10, the mix a shared interruption queue
  really carries — spot warnings and rebalance recommendations for instances of other clusters,
  state changes that need nothing, Auto Scaling test notifications, and malformed bodies; none of
  them changes the cluster, so every batch sees the same work;
* latency: one spot warning per owned node (``--nodes`` nodes with ``--pods`` pods each), in batches
  of 10; per message, the time from the record reaching the handler to the node being cordoned and
  every eviction issued (the replacement launch in between is a no-op here: ``nodewright bench
  latency`` measures launches). The drains then finish inside the same invocations.

Goal (issue 7): ≥ 200 messages/s and p99 ≤ 2 s.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import time
import uuid
from typing import Any

from bench._report import print_figures, save
from sandbox import events
from sandbox.eks_amis import nodeadm_user_data


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--messages", type=int, default=1000, help="messages for the throughput run (default 1000)"
    )
    parser.add_argument("--nodes", type=int, default=20, help="owned spot nodes to interrupt (default 20)")
    parser.add_argument("--pods", type=int, default=5, help="pods per node (default 5)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")


class _NoReplacement:
    """Replacement launches are measured by ``bench latency``; here they would only add moto's CreateFleet."""

    def __call__(self, ctx: Any, node_names: list[str], *, guard: Any = None) -> _NoReplacement:
        return self

    def summary(self) -> dict[str, Any]:
        return {"skipped": "bench: replacement launch not measured here"}


class _Context:
    function_name = "nodewright-interruption-bench"
    memory_limit_in_mb = 1024
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:nodewright-interruption-bench"
    aws_request_id = "bench"

    def __init__(self, seconds: float = 120.0) -> None:
        self._deadline = time.monotonic() + seconds

    def get_remaining_time_in_millis(self) -> int:
        return int((self._deadline - time.monotonic()) * 1000)


def _foreign_mix(count: int) -> list[str]:
    """Messages that are acknowledged without touching the cluster's objects."""
    makers = [
        lambda i: events.spot_warning(f"i-0f{i:015x}"),
        lambda i: events.rebalance_recommendation(f"i-0e{i:015x}"),
        lambda i: events.state_change(f"i-0d{i:015x}", "pending"),
        lambda i: {
            "Event": "autoscaling:TEST_NOTIFICATION",
            "RequestId": str(uuid.uuid4()),
            "AutoScalingGroupName": "x",
        },
        lambda i: "{malformed",
    ]
    return [m if isinstance(m := makers[i % len(makers)](i), str) else json.dumps(m) for i in range(count)]


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Any:
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old


def _owned_nodes(sb: Any, cluster: Any, nodes: int, pods: int) -> list[str]:
    """``nodes`` running instances with NodeClaims, registered by the kubelet, each running ``pods`` pods."""
    from nodewright.cluster.resources import PODS

    ec2 = sb.aws_client("ec2")
    zone, subnet = next(iter(sb.aws.subnets.items()))
    image = sb.aws.images["al2023/x86_64"]  # the AMI whose bootstrap reads the nodeadm user data below
    names = [f"bench-{i:03d}" for i in range(nodes)]
    for name in names:
        cluster.create_nodeclaim(
            {
                "metadata": {
                    "name": name,
                    "labels": {"karpenter.sh/nodepool": "bench", "karpenter.sh/capacity-type": "spot"},
                    "finalizers": ["karpenter.sh/termination"],
                },
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                    "requirements": [
                        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}
                    ],
                },
            }
        )
    tags = [
        {"Key": f"kubernetes.io/cluster/{sb.cluster_name}", "Value": "owned"},
        {"Key": "eks:eks-cluster-name", "Value": sb.cluster_name},
    ]
    instances: dict[str, str] = {}
    for name in names:
        reply = ec2.run_instances(
            ImageId=image,
            InstanceType="m5.large",
            MinCount=1,
            MaxCount=1,
            SubnetId=subnet,
            UserData=nodeadm_user_data(sb.cluster_name),  # the bootstrap that joins the cluster
            TagSpecifications=[
                {
                    "ResourceType": "instance",
                    "Tags": [*tags, {"Key": "karpenter.sh/nodeclaim", "Value": name}],
                }
            ],
        )
        instances[name] = reply["Instances"][0]["InstanceId"]
    ec2.close()
    deadline = time.monotonic() + 60
    by_instance: dict[str, str] = {}
    while len(by_instance) < nodes:
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {len(by_instance)} of {nodes} nodes registered within 60 s")
        by_instance = {
            n["spec"].get("providerID", "").rsplit("/", 1)[-1]: n["metadata"]["name"]
            for n in cluster.list_nodes()
        }
        by_instance = {k: v for k, v in by_instance.items() if k in instances.values()}
        time.sleep(0.2)
    for name, instance_id in instances.items():
        node = by_instance[instance_id]
        cluster.patch_nodeclaim_status(
            name, {"providerID": f"aws:///{zone}/{instance_id}", "instanceID": instance_id, "nodeName": node}
        )
        for index in range(pods):
            cluster.create(
                PODS,
                {
                    "metadata": {
                        "name": f"{name}-pod-{index}",
                        "namespace": "default",
                        "labels": {"app": name},
                    },
                    "spec": {
                        "nodeName": node,
                        "terminationGracePeriodSeconds": 5,
                        "containers": [
                            {"name": "app", "image": "public.ecr.aws/docker/library/busybox:1.36"}
                        ],
                    },
                },
            )
    return list(instances.values())


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))] if ordered else 0.0


def _measure(app: Any, processor: Any, instance_ids: list[str], messages: int) -> dict[str, Any]:
    """Throughput over the foreign mix, then one spot warning per owned node; per-message latencies."""
    latencies: list[float] = []
    real_handle = processor.handle

    def timed_handle(message: Any, **kwargs: Any) -> Any:
        started = time.monotonic()
        result = real_handle(message, **kwargs)
        if result.disposition.value == "acted":
            latencies.append(time.monotonic() - started)
        return result

    processor.handle = timed_handle
    foreign = events.sqs_batches(_foreign_mix(messages))
    app.handler(foreign[0], _Context())  # warm: the first batch connects and builds the clients
    failures = 0
    started = time.perf_counter()
    for batch in foreign:
        failures += len(app.handler(batch, _Context())["batchItemFailures"])
    throughput_seconds = time.perf_counter() - started
    spot = [json.dumps(events.spot_warning(i)) for i in instance_ids]
    started = time.perf_counter()
    for batch in events.sqs_batches(spot):
        failures += len(app.handler(batch, _Context())["batchItemFailures"])
    return {
        "throughput_seconds": throughput_seconds,
        "drain_seconds": time.perf_counter() - started,
        "latencies": latencies,
        "failures": failures,
    }


def _left_for_ec2(claim: dict[str, Any], cluster: Any) -> bool:
    """Drained, its node gone, waiting (deleting) for EC2 to take the instance."""
    from nodewright.termination.terminate import INSTANCE_GOING_ANNOTATION

    meta = claim["metadata"]
    node = (claim.get("status") or {}).get("nodeName")
    return (
        bool(meta.get("deletionTimestamp"))
        and (meta.get("annotations") or {}).get(INSTANCE_GOING_ANNOTATION) == "true"
        and (not node or cluster.find_node(node) is None)
    )


def run(args: argparse.Namespace) -> int:
    from sandbox import Sandbox

    quiet = {"POWERTOOLS_LOG_LEVEL": "WARNING", "POWERTOOLS_METRICS_DISABLED": "true"}
    with (
        Sandbox(cluster_name="bench-interruption", boot_delay=0.1, init_delay=0.1) as sb,
        _environment({**sb.env(), **quiet}),
    ):
        sb.apply_crds()
        from nodewright.cluster import reset_connections
        from nodewright.context import ContainerContext
        from nodewright.interruption.processing import InterruptionProcessor
        from nodewright.observability import logger, metrics
        from nodewright.settings import Settings

        from sandbox.lambdas import load_function

        app = load_function("interruption")
        settings = Settings.from_env({**os.environ, **sb.credentials("interruption")})  # as its own role
        cluster = sb.admin_cluster()  # the setup is the user's; the handler acts as the functions' identity
        instance_ids = _owned_nodes(sb, cluster, args.nodes, args.pods)
        container = ContainerContext(logger=logger(), metrics=metrics(), settings=settings)
        processor = app.processor = InterruptionProcessor(container, replace=_NoReplacement())
        try:
            # The handler logs and emits EMF on stdout, as in Lambda: keep that out of the figures.
            with contextlib.redirect_stdout(io.StringIO()):
                measured = _measure(app, processor, instance_ids, args.messages)
            claims = cluster.list_nodeclaims(label_selector="karpenter.sh/nodepool=bench")
            # A spot warning's NodeClaim stays, deleting, until EC2 has reclaimed the instance (no
            # one reclaims here): drained and left for EC2 is done, anything else is left over.
            for_ec2 = [c for c in claims if _left_for_ec2(c, cluster)]
            left = len(claims) - len(for_ec2)
        finally:
            reset_connections()

    latencies = measured["latencies"]
    failures = measured["failures"]
    throughput_seconds = measured["throughput_seconds"]
    drain_seconds = measured["drain_seconds"]
    figures = {
        "messages": args.messages,
        "batch": events.SQS_BATCH_SIZE,
        "messagesPerSecond": round(args.messages / throughput_seconds, 1),
        "nodes": args.nodes,
        "podsPerNode": args.pods,
        "cordonAndEvictP50Seconds": round(statistics.median(latencies), 3) if latencies else None,
        "cordonAndEvictP99Seconds": round(_percentile(latencies, 0.99), 3) if latencies else None,
        "interruptionsActed": len(latencies),
        "secondsUntilAllDrained": round(drain_seconds, 2),
        "nodeClaimsLeft": left,
        "nodeClaimsLeftForEc2": len(for_ec2),
        "failedMessages": failures,
    }
    print_figures(figures, args.json, sort_keys=False)
    save(args, {**figures, "cordonAndEvictSeconds": sorted(round(s, 4) for s in latencies)})
    ok = failures == 0 and left == 0 and len(latencies) == args.nodes
    return 0 if ok else 1
