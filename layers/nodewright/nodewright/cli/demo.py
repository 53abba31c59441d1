"""``nodewright demo [--kubeconfig PATH]``: the seeds' story in the sandbox, told as it happens.

The sandbox (Kubernetes API emulator, simulated scheduler/kubelet/controllers, moto) runs the
unchanged provisioner handler, invoked back to back as EventBridge would invoke it. The story:
the seeds' EC2NodeClass and NodePools converted to v1 (``nodewright convert``) and applied; the
``inflate`` deployment (10 x 1 CPU / 1 GiB); the plan and the CreateFleet launches; nodes
registering; pods Running; then ``web-pod``, ``gpu-pod`` and ``batch-pod`` landing on their pools'
nodes; a summary of pods, nodes by type/zone/capacity type, $/h and pending → launch latency.

``--kubeconfig PATH`` runs the same story against another API server (the emulator stays off;
the simulators and moto still run here). Without the sandbox (a layer-only install) the command
validates the seeds' manifests instead and says so.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

SEEDS = Path(__file__).resolve().parents[4] / "events" / "manifests"
CLUSTER = "my-eks-cluster"  # the seeds' subnet/security-group selectors name this cluster
REGION = "us-west-2"  # the seeds' web-app NodePool pins us-west-2a
ZONES = ("us-west-2a", "us-west-2b", "us-west-2c")
SEED_NODEPOOLS = ("default", "web-app", "gpu-workload", "batch-jobs")
SEED_PODS = ("web-pod", "gpu-pod", "batch-pod")
INVOCATION_SECONDS = 10.0  # each demo invocation loops this long (the real schedule: every minute)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="the seeds' story in the sandbox: NodePools, inflate, launches, pods Running, a summary",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--kubeconfig", help="run against this API server instead of the built-in emulator")
    parser.add_argument(
        "--boot-delay", type=float, default=1.0, help="seconds a simulated instance takes to boot"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        import moto  # noqa: F401 (development side: the sandbox needs it)

        from sandbox import Sandbox  # noqa: F401
    except ImportError as exc:
        return _validate_only(str(exc))
    quiet_functions()
    story = SandboxRun(kubeconfig=args.kubeconfig, boot_delay=args.boot_delay)
    with story:
        return tell_the_story(story)


def quiet_functions() -> None:
    """The functions' JSON logs and EMF metrics would drown the story: keep warnings only."""
    os.environ["POWERTOOLS_METRICS_DISABLED"] = "true"
    os.environ["POWERTOOLS_LOG_LEVEL"] = "WARNING"
    from nodewright.observability import logger

    logger().setLevel("WARNING")


def _validate_only(reason: str) -> int:
    from nodewright.cli import main

    print(f"The sandbox is not installed here ({reason}); validating the seeds' manifests instead.")
    return main(["validate", "--quiet", *sorted(str(p) for p in SEEDS.glob("*.yaml"))])


class SandboxRun:
    """A started sandbox with the real provisioner handler running back to back in a thread.

    Also used by ``bench latency``: ``fleet_calls`` holds (monotonic time, NodeClaim name) of every
    CreateFleet request, taken from a botocore hook on the provider's own EC2 client.
    """

    def __init__(
        self, *, kubeconfig: str | None = None, boot_delay: float = 1.0, quiet: bool = False
    ) -> None:
        self.kubeconfig = kubeconfig
        self.boot_delay = boot_delay
        self.quiet = quiet
        self.started = time.monotonic()
        self.fleet_calls: list[tuple[float, str]] = []
        self.invocations: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.sandbox: Any = None
        self.cluster: Any = None
        self.settings: Any = None

    def say(self, message: str) -> None:
        if not self.quiet:
            print(f"[{time.monotonic() - self.started:6.1f}s] {message}", flush=True)

    def __enter__(self) -> SandboxRun:
        from sandbox import Sandbox

        self.say(
            f"starting the sandbox (cluster {CLUSTER}, {REGION}, instances boot in {self.boot_delay:g}s)"
        )
        self.sandbox = Sandbox(
            cluster_name=CLUSTER,
            region=REGION,
            zones=ZONES,
            boot_delay=self.boot_delay,
            kubeconfig=self.kubeconfig,
        ).start()
        os.environ.update(self.sandbox.env())
        crds = self.sandbox.apply_crds()
        where = self.kubeconfig or "the built-in API emulator"
        self.say(
            f"sandbox up in {self.sandbox.startup_seconds:.1f}s; API server: {where}; CRDs: {', '.join(crds)}"
        )
        from nodewright.cloud.provider import CloudProvider
        from nodewright.cluster import connect
        from nodewright.settings import Settings

        self.settings = Settings.from_env()
        self.cluster = connect(self.settings)
        provider = CloudProvider.shared(self.settings)  # the handler's Context reuses this one
        provider.ec2.meta.events.register("before-parameter-build.ec2.CreateFleet", self._record_fleet)
        return self

    def _record_fleet(self, params: dict[str, Any], **_: Any) -> None:
        tags = {
            t["Key"]: t["Value"] for spec in params.get("TagSpecifications", []) for t in spec.get("Tags", [])
        }
        self.fleet_calls.append((time.monotonic(), tags.get("karpenter.sh/nodeclaim", "")))

    def start_provisioner(self) -> None:
        """Invoke the real handler back to back (each invocation loops INVOCATION_SECONDS)."""
        self._thread = threading.Thread(target=self._invoke_forever, name="provisioner", daemon=True)
        self._thread.start()

    def _invoke_forever(self) -> None:
        from nodewright.provisioning import loop
        from sandbox.lambdas import LambdaContext, load_function, scheduled_event

        app = load_function("provisioner")
        while not self._stop.is_set():
            context = LambdaContext(loop.SAFETY_MARGIN_SECONDS + INVOCATION_SECONDS)
            try:
                self.invocations.append(app.handler(scheduled_event(str(len(self.invocations))), context))
            except Exception as exc:  # a failed invocation is retried by the next schedule, as in Lambda
                self.say(f"provisioner invocation failed: {exc}")
                time.sleep(1)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=INVOCATION_SECONDS + 30)
        from nodewright.cluster import reset_connections

        reset_connections()
        if self.sandbox is not None:
            self.sandbox.stop()

    def wait_for(self, what: str, check: Any, timeout: float = 120.0, on_tick: Any = None) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if on_tick:
                on_tick()
            if check():
                return True
            time.sleep(0.2)
        self.say(f"gave up waiting for {what} after {timeout:.0f}s")
        return False


# --- the story ------------------------------------------------------------------------------------


def seed_objects(story: SandboxRun) -> tuple[list[dict[str, Any]], list[str]]:
    """The seeds' EC2NodeClass and NodePools in v1 form (``nodewright convert``), with the gaps filled."""
    from nodewright.api.convert import convert_document
    from nodewright.api.manifests import load_files

    notes: list[str] = []
    objects: list[dict[str, Any]] = []
    files = [SEEDS / "v1beta1-ec2nodeclass-default.yaml"]
    files += [SEEDS / f"v1beta1-nodepool-{name}.yaml" for name in SEED_NODEPOOLS]
    for loaded in load_files(files):
        for doc in convert_document(loaded.doc).documents:
            if doc.get("kind") == "EC2NodeClass":
                spec = doc.setdefault("spec", {})
                spec.setdefault("role", story.sandbox.aws.node_role_name)
                spec.setdefault("amiSelectorTerms", [{"alias": "al2@latest"}])
                notes.append(
                    "EC2NodeClass default: the seed has neither role nor amiSelectorTerms (v1 needs both); "
                    f"set role={spec['role']} and alias al2@latest (its amiFamily AL2)"
                )
            objects.append(doc)
    return objects, notes


def warm_catalog(story: SandboxRun, nodeclass: dict[str, Any]) -> None:
    """Load the instance catalog once, as a warm Lambda container has it cached (5 minutes).

    moto answers DescribeInstanceTypes in seconds where EC2 takes about one; without this the
    first launch's latency would measure moto, not the provisioner."""
    from nodewright.cloud.provider import CloudProvider

    started = time.monotonic()
    count = len(CloudProvider.shared(story.settings).instance_types(nodeclass))
    took = time.monotonic() - started
    story.say(f"instance catalog loaded: {count} types with prices ({took:.1f}s, once per warm container)")


def tell_the_story(story: SandboxRun) -> int:
    from nodewright.api.manifests import load_files, validate_files
    from nodewright.cluster.resources import EC2NODECLASSES, NODEPOOLS, PODS

    cluster = story.cluster
    objects, notes = seed_objects(story)
    for note in notes:
        story.say(note)
    for obj in objects:
        resource = EC2NODECLASSES if obj["kind"] == "EC2NodeClass" else NODEPOOLS
        cluster.create(resource, obj)
        story.say(f"applied {obj['kind']} {obj['metadata']['name']} (converted to {obj['apiVersion']})")
    warm_catalog(story, next(o for o in objects if o["kind"] == "EC2NodeClass"))
    mixed = validate_files([SEEDS / "v1beta1-nodepool-mixed-workload.yaml"]).documents[0]
    story.say(f"not applied: NodePool mixed-workload is invalid: {mixed.findings[0]}")

    watcher = Watcher(story)
    story.start_provisioner()
    story.say("provisioner: the real handler, invoked back to back (every minute on AWS)")
    (deployment,) = [d.doc for d in load_files([SEEDS / "deployment-inflate.yaml"])]
    cluster.request("POST", "/apis/apps/v1/namespaces/default/deployments", body=deployment)
    story.say("applied deployment inflate: 10 replicas x 1 CPU / 1 GiB")
    story.wait_for("inflate Running", lambda: watcher.running("inflate-") == 10, on_tick=watcher.tick)

    for name in SEED_PODS:
        (pod,) = [d.doc for d in load_files([SEEDS / f"pod-{name}.yaml"])]
        cluster.create(PODS, pod, namespace="default")
        story.say(f"applied pod {name}")
    story.wait_for(
        "web/gpu/batch pods Running",
        lambda: all(watcher.running(name) for name in SEED_PODS),
        on_tick=watcher.tick,
    )
    watcher.tick()
    print()
    print(watcher.summary())
    return 0


class Watcher:
    """Polls the cluster and narrates what changed: NodeClaims, launches, nodes, pods."""

    def __init__(self, story: SandboxRun) -> None:
        self.story = story
        self.seen: set[str] = set()
        self.pending_since: dict[str, float] = {}
        self.pods: list[dict[str, Any]] = []
        self.claims: list[dict[str, Any]] = []
        self.nodes: list[dict[str, Any]] = []

    def once(self, key: str) -> bool:
        if key in self.seen:
            return False
        self.seen.add(key)
        return True

    def running(self, prefix: str) -> int:
        return sum(
            1
            for p in self.pods
            if p["metadata"]["name"].startswith(prefix) and (p.get("status") or {}).get("phase") == "Running"
        )

    def tick(self) -> None:
        from nodewright.cluster.resources import NODECLAIMS, NODES, PODS

        cluster, say = self.story.cluster, self.story.say
        self.pods = cluster.list(PODS, namespace="default")
        self.claims = cluster.list(NODECLAIMS)
        self.nodes = cluster.list(NODES)
        now = time.monotonic()
        for pod in self.pods:
            self.pending_since.setdefault(pod["metadata"]["name"], now)
        unschedulable = [p for p in cluster.list_pending_pods() if p["metadata"]["namespace"] == "default"]
        if unschedulable and self.once(f"unschedulable-{len(unschedulable)}-{len(self.claims)}"):
            say(f"{len(unschedulable)} pod(s) Unschedulable (kube-scheduler found no node)")
        for claim in self.claims:
            name = claim["metadata"]["name"]
            status = claim.get("status") or {}
            labels = claim["metadata"].get("labels") or {}
            if self.once(f"claim-{name}"):
                values = next(
                    (
                        r["values"]
                        for r in claim["spec"]["requirements"]
                        if r["key"] == "node.kubernetes.io/instance-type"
                    ),
                    [],
                )
                shown = ", ".join(values[:4]) + (" …" if len(values) > 4 else "")
                say(f"plan → NodeClaim {name} (NodePool {labels.get('karpenter.sh/nodepool')}): {shown}")
            if status.get("instanceID") and self.once(f"launch-{name}"):
                zone = labels.get("topology.kubernetes.io/zone")
                where = f"{labels.get('karpenter.sh/capacity-type')} in {zone}"
                say(
                    f"CreateFleet → {labels.get('node.kubernetes.io/instance-type')} {where} "
                    f"({status['instanceID']}) for {name}"
                )
            if status.get("nodeName") and self.once(f"registered-{name}"):
                say(f"node {status['nodeName']} registered for {name}")
        for pod in self.pods:
            name = pod["metadata"]["name"]
            if (pod.get("status") or {}).get("phase") == "Running" and self.once(f"running-{name}"):
                node = pod["spec"].get("nodeName", "")
                node_labels = next(
                    (n["metadata"].get("labels", {}) for n in self.nodes if n["metadata"]["name"] == node), {}
                )
                pool = node_labels.get("karpenter.sh/nodepool", "?")
                say(
                    f"pod {name} Running on {node} (NodePool {pool}, "
                    f"{node_labels.get('node.kubernetes.io/instance-type', '?')})"
                )

    def summary(self) -> str:
        return render_summary(self.story, self.pods, self.claims, self.nodes, self.pending_since)


def pending_to_launch(
    story: SandboxRun, pending_since: dict[str, float], claims: list[dict[str, Any]]
) -> list[float]:
    """Per pod: seconds from first seen pending to the CreateFleet request of the NodeClaim it was
    nominated to (from the ``Nominated`` events)."""
    from nodewright.cluster.resources import EVENTS

    fleet_at = {}
    for moment, claim in story.fleet_calls:
        fleet_at.setdefault(claim, moment)
    latencies = []
    for event in story.cluster.list(EVENTS, namespace="default"):
        if event.get("reason") != "Nominated" or "nodeclaim/" not in event.get("message", ""):
            continue
        claim = event["message"].rsplit("nodeclaim/", 1)[1]
        pod = event["involvedObject"]["name"]
        if claim in fleet_at and pod in pending_since:
            latencies.append(max(0.0, fleet_at[claim] - pending_since[pod]))
    return latencies


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def render_summary(
    story: SandboxRun,
    pods: list[dict[str, Any]],
    claims: list[dict[str, Any]],
    nodes: list[dict[str, Any]],
    pending_since: dict[str, float],
) -> str:
    from collections import Counter

    from nodewright.cloud.provider import CloudProvider
    from nodewright.cluster.resources import EC2NODECLASSES

    pool_of = {
        n["metadata"]["name"]: (n["metadata"].get("labels") or {}).get("karpenter.sh/nodepool", "")
        for n in nodes
    }
    lines = ["Pods", f"  {'pod':<26} {'phase':<9} {'node':<28} nodepool"]
    for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
        node = pod["spec"].get("nodeName") or "-"
        phase = (pod.get("status") or {}).get("phase", "?")
        lines.append(f"  {pod['metadata']['name']:<26} {phase:<9} {node:<28} {pool_of.get(node, '-')}")
    groups: Counter[tuple[str, str, str]] = Counter()
    for claim in claims:
        labels = claim["metadata"].get("labels") or {}
        groups[
            (
                labels.get("node.kubernetes.io/instance-type", "?"),
                labels.get("topology.kubernetes.io/zone", "?"),
                labels.get("karpenter.sh/capacity-type", "?"),
            )
        ] += 1
    provider = CloudProvider.shared(story.settings)
    offerings = {
        (t.name, o.zone, o.capacity_type): o.price
        for nodeclass in story.cluster.list(EC2NODECLASSES)
        for t in provider.instance_types(nodeclass)
        for o in t.offerings
    }
    lines += ["", "Nodes", f"  {'type':<14} {'zone':<12} {'capacity':<10} {'count':>5} {'$/h each':>9}"]
    cost = 0.0
    for (name, zone, capacity_type), count in sorted(groups.items()):
        price = offerings.get((name, zone, capacity_type), 0.0)
        cost += price * count
        lines.append(f"  {name:<14} {zone:<12} {capacity_type:<10} {count:>5} {price:>9.4f}")
    latencies = pending_to_launch(story, pending_since, claims)
    lines += [
        "",
        f"Cluster cost: ${cost:.4f}/h for {sum(groups.values())} node(s)",
        f"Pending → CreateFleet: p50 {percentile(latencies, 50):.2f}s, p99 {percentile(latencies, 99):.2f}s "
        f"over {len(latencies)} pod(s) that got new capacity",
    ]
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(run(argparse.Namespace(kubeconfig=None, boot_delay=1.0)))
