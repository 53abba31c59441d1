"""Parts four and five of ``make demo``: a consolidation onto a cheaper node, then a drift roll.

Both run the unchanged ``disruption`` handler, invoked back to back as the every-minute schedule
would invoke it (here every ``TICK_SECONDS``), while the story's watcher narrates what the cluster
shows. The workload has a NodePool of its own (``burst``, ``WhenEmptyOrUnderutilized`` after
``consolidateAfter: 10s``, on-demand, tainted so that only its pods land there) and an
EC2NodeClass of its own (``burst``, alias ``al2023@latest``), so the seeds' NodePools are left
as part three left them:

* **consolidation**: a ``report`` pod (2.5 CPU) gets a node of 4 vCPUs; two ``api`` pods (250m
  each) land in the room it leaves; the report finishes, and the node is now mostly idle. The
  handler waits out ``consolidateAfter``, validates its command for 15 s, launches one strictly
  cheaper node, waits until it is initialized, drains and removes the old one: $/h before, after.
* **drift**: the EC2NodeClass now selects ``al2@latest``. Dynamic drift is looked at once a minute
  per container (``disruption.drift``), so the verdict comes within a minute; the drifted node is
  replaced (a replacement with the new AMI first, then the drain) within the ``Drifted`` budget.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from sandbox.runtime import events

BURST = "burst"
BURST_TAINT = {"key": "nodewright.io/demo", "value": BURST, "effect": "NoSchedule"}
BURST_LABEL = {"workload": BURST}
TICK_SECONDS = 5.0  # the demo's stand-in for the disruption function's minute schedule
FUNCTION_SECONDS = 60.0
PART_SECONDS = 180.0  # a part gives up after this long


class DisruptionRunner:
    """The real disruption handler, invoked back to back; each invocation's report narrated once."""

    def __init__(self, story: Any, region: str) -> None:
        from sandbox.runtime.lambdas import load_function

        self.story = story
        self.region = region
        self.handler = load_function("disruption").handler
        self.invocations = 0
        self.told: set[str] = set()

    def invoke(self, watcher: Any = None) -> dict[str, Any]:
        """One invocation; while it runs, ``watcher`` (if any) narrates the cluster every 0.5 s."""
        from sandbox.runtime.lambdas import LambdaContext

        result: dict[str, Any] = {}

        def call() -> None:
            result.update(
                self.handler(
                    events.scheduled_event(region=self.region),
                    LambdaContext(FUNCTION_SECONDS, "nodewright-disruption"),
                )
            )

        worker = threading.Thread(target=call, name="disruption", daemon=True)
        worker.start()
        while worker.is_alive():
            worker.join(0.5)
            if watcher is not None:
                watcher.tick()
        self.invocations += 1
        self.narrate(result)
        return result

    def narrate(self, result: dict[str, Any]) -> None:
        say = self.story.say
        for claim, reason in sorted(result.get("drifted", {}).items()):
            if self._once(f"drifted {claim} {reason}"):
                say(f"disruption: NodeClaim {claim} drifted ({reason})")
        for decision in result.get("decisions", []):
            say(f"disruption command: {decision['description']}")
        for outcome in result.get("commands", []):
            if outcome["action"] != "waiting" and self._once(f"{outcome['command']} {outcome['action']}"):
                detail = f": {outcome['detail']}" if outcome.get("detail") else ""
                say(f"command {outcome['action']} ({', '.join(outcome['nodeclaims'])}){detail}")
        for action in result.get("disrupted", []):
            price = action.get("pricePerHour")
            say(
                f"removed node {action['node']} ({action['reason']}, NodePool {action['nodepool']}"
                f"{f', ${price:.4f}/h' if price else ''})"
            )

    def until(self, what: str, done: Any, watcher: Any, timeout: float = PART_SECONDS) -> bool:
        """Invoke until ``done()`` holds (checked after every invocation); False after ``timeout``."""
        started = time.monotonic()
        while True:
            self.invoke(watcher)
            watcher.tick()
            if done():
                return True
            if time.monotonic() - started > timeout:
                self.story.say(f"gave up waiting for {what} after {timeout:.0f}s")
                return False
            time.sleep(TICK_SECONDS)

    def _once(self, key: str) -> bool:
        if key in self.told:
            return False
        self.told.add(key)
        return True


def burst_objects(seed_nodeclass: dict[str, Any]) -> list[dict[str, Any]]:
    """The EC2NodeClass and NodePool of parts four and five (the seed's networking and role)."""
    spec = {k: v for k, v in seed_nodeclass["spec"].items() if k != "amiFamily"}
    nodeclass = {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": BURST},
        "spec": {**spec, "amiSelectorTerms": [{"alias": "al2023@latest"}]},
    }
    nodepool = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": BURST},
        "spec": {
            "template": {
                "metadata": {"labels": dict(BURST_LABEL)},
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": BURST},
                    "requirements": [
                        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}
                    ],
                    "taints": [dict(BURST_TAINT)],
                },
            },
            "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "10s"},
        },
    }
    return [nodeclass, nodepool]


def _pod_spec(cpu: str, memory: str) -> dict[str, Any]:
    return {
        "nodeSelector": dict(BURST_LABEL),
        "tolerations": [{**BURST_TAINT, "operator": "Equal"}],
        "containers": [
            {
                "name": "app",
                "image": "public.ecr.aws/eks-distro/kubernetes/pause:3.7",
                "resources": {"requests": {"cpu": cpu, "memory": memory}},
            }
        ],
    }


def _api_deployment() -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "api", "namespace": "default"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "api"}},
            "template": {"metadata": {"labels": {"app": "api"}}, "spec": _pod_spec("250m", "256Mi")},
        },
    }


def _running_on(watcher: Any, prefix: str) -> dict[str, str]:
    """Pod → node of the Running, not terminating pods whose name starts with ``prefix``."""
    return {
        p["metadata"]["name"]: p["spec"].get("nodeName", "")
        for p in watcher.pods
        if p["metadata"]["name"].startswith(prefix)
        and (p.get("status") or {}).get("phase") == "Running"
        and not p["metadata"].get("deletionTimestamp")
    }


def _node(watcher: Any, name: str) -> dict[str, Any] | None:
    return next((n for n in watcher.nodes if n["metadata"]["name"] == name), None)


def _describe(node: dict[str, Any] | None, prices: dict[tuple[str, str, str], float]) -> tuple[str, float]:
    """``t4g.small on-demand`` and its $/h."""
    labels = (node or {}).get("metadata", {}).get("labels") or {}
    key = (
        labels.get("node.kubernetes.io/instance-type", "?"),
        labels.get("topology.kubernetes.io/zone", "?"),
        labels.get("karpenter.sh/capacity-type", "?"),
    )
    return f"{key[0]} {key[2]}", prices.get(key, 0.0)


def _image_of(story: Any, node: dict[str, Any] | None) -> str:
    instance_id = ((node or {}).get("spec") or {}).get("providerID", "").rsplit("/", 1)[-1]
    if not instance_id.startswith("i-"):
        return "?"
    ec2 = story.sandbox.aws_client("ec2")
    try:
        found = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"]
        return str(found[0]["Instances"][0].get("ImageId", "?")) if found else "?"
    finally:
        ec2.close()


def consolidate(
    story: Any, watcher: Any, runner: DisruptionRunner, seed_nodeclass: dict[str, Any]
) -> str | None:
    """Part four; the node the ``api`` pods end on (None when the story could not be told)."""
    from nodewright.cluster.resources import EC2NODECLASSES, NODEPOOLS, PODS

    from sandbox.scenarios.demo import offering_prices

    cluster = story.cluster
    story.say(
        "Part four: consolidation. NodePool burst (WhenEmptyOrUnderutilized, consolidateAfter 10s, "
        "on-demand, tainted for its own pods) with EC2NodeClass burst (alias al2023@latest)"
    )
    for obj in burst_objects(seed_nodeclass):
        cluster.create(EC2NODECLASSES if obj["kind"] == "EC2NodeClass" else NODEPOOLS, obj)
    report = {"metadata": {"name": "report", "namespace": "default"}, "spec": _pod_spec("2500m", "4Gi")}
    report["spec"]["restartPolicy"] = "Never"
    cluster.create(PODS, report, namespace="default")
    story.say("applied pod report: 2.5 CPU / 4 GiB, a job that needs a big node for a while")
    if not story.wait_for(
        "report Running", lambda: bool(_running_on(watcher, "report")), on_tick=watcher.tick
    ):
        return None
    big = _running_on(watcher, "report")["report"]
    cluster.request("POST", "/apis/apps/v1/namespaces/default/deployments", body=_api_deployment())
    story.say("applied deployment api: 2 replicas x 250m / 256 MiB")
    if not story.wait_for(
        "api Running", lambda: len(_running_on(watcher, "api-")) == 2, on_tick=watcher.tick
    ):
        return None
    prices = offering_prices(story)
    shape, before = _describe(_node(watcher, big), prices)
    where = sorted(set(_running_on(watcher, "api-").values()))
    story.say(f"node {big} ({shape}, ${before:.4f}/h) runs report and the api pods (on {', '.join(where)})")
    cluster.delete(PODS, "report", namespace="default", grace_period_seconds=0)
    story.say(f"report finished (deleted): {big} keeps 2 api pods, 0.5 of its CPUs")

    def moved() -> bool:
        nodes = set(_running_on(watcher, "api-").values())
        return _node(watcher, big) is None and len(_running_on(watcher, "api-")) == 2 and big not in nodes

    if not runner.until("the consolidation", moved, watcher):
        return None
    small = sorted(set(_running_on(watcher, "api-").values()))[0]
    new_shape, after = _describe(_node(watcher, small), offering_prices(story))
    story.say(
        f"consolidated: NodePool burst ${before:.4f}/h ({big}, {shape}) → ${after:.4f}/h ({small}, "
        f"{new_shape}), saves ${before - after:.4f}/h; api pods Running on {small}"
    )
    return small


def drift(story: Any, watcher: Any, runner: DisruptionRunner, node_name: str) -> bool:
    """Part five: the EC2NodeClass selects another AMI and its node is replaced; True when it was."""
    from nodewright.cluster.resources import EC2NODECLASSES

    old_image = _image_of(story, _node(watcher, node_name))
    story.cluster.patch(EC2NODECLASSES, BURST, {"spec": {"amiSelectorTerms": [{"alias": "al2@latest"}]}})
    story.say(
        f"Part five: drift. EC2NodeClass burst now selects alias al2@latest; node {node_name} runs "
        f"{old_image}. Dynamic drift is looked at once a minute, then the node is replaced within the "
        "Drifted budget (10%: one node at a time)"
    )

    def rolled() -> bool:
        nodes = set(_running_on(watcher, "api-").values())
        return (
            _node(watcher, node_name) is None
            and len(_running_on(watcher, "api-")) == 2
            and node_name not in nodes
        )

    if not runner.until("the drift roll", rolled, watcher):
        return False
    new = sorted(set(_running_on(watcher, "api-").values()))[0]
    new_image = _image_of(story, _node(watcher, new))
    story.say(
        f"drift rolled: {node_name} ({old_image}) replaced by {new} ({new_image}); api pods Running on {new}"
    )
    return new_image != old_image
