"""The seeds' story in the sandbox, told as it happens (``nodewright demo``, ``make demo``).

The sandbox (Kubernetes API emulator, simulated scheduler/kubelet/controllers, moto) runs the
unchanged provisioner handler, invoked back to back as EventBridge would invoke it. The story:
the seeds' EC2NodeClass and NodePools converted to v1 (``nodewright convert``) and applied; the
``inflate`` deployment (10 x 1 CPU / 1 GiB); the plan and the CreateFleet launches; nodes
registering; pods Running; then ``web-pod``, ``gpu-pod`` and ``batch-pod`` landing on their pools'
nodes; a summary of pods, nodes by type/zone/capacity type, $/h and pending → launch latency.
Then a spot interruption: an EC2 Spot Instance Interruption Warning for a node running ``inflate``
pods goes through the real ``spot_events`` handler (and, as the same event, through the queue's
``interruption`` handler, which acknowledges it without acting again), with a timeline of the
replacement (or of the pods moving to existing capacity, when they fit there), the cordon, the
drain under a PodDisruptionBudget and the node's removal, against the two-minute notice. Last,
``inflate`` scales down and the real ``disruption`` handler removes the nodes left empty, one at
a time as the NodePool's budget allows; then (``sandbox.scenarios.demo_disruption``) a node left mostly idle
is consolidated onto a strictly cheaper one, and an AMI selection change rolls its node.

``--kubeconfig PATH`` runs the same story against another API server (the emulator stays off;
the simulators and moto still run here). The functions act with the identity ``deploy/rbac.yaml``
binds (there: the kubeconfig's credentials impersonating it, ``Sandbox``); the story's user with
the kubeconfig's own.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
from typing import Any

from sandbox.harness import (
    REGION,
    SEEDS,
    SandboxRun,
    WithoutMetricLines,
    claims_of_pods,
    percentile,
    quiet_functions,
    seed_objects,
    warm_catalog,
)
from sandbox.runtime import events
from sandbox.scenarios.demo_disruption import DisruptionRunner, consolidate, drift

SEED_PODS = ("web-pod", "gpu-pod", "batch-pod")
NOTICE_SECONDS = 120.0  # EC2 reclaims a spot instance two minutes after its interruption warning
FUNCTION_SECONDS = 60.0  # the interruption functions' Lambda timeout in this story
INFLATE = "inflate-"
SCALED_DOWN_REPLICAS = 3
DISRUPTION_WAIT_SECONDS = 150.0  # part three gives up after this long (normally one invocation)


def main(kubeconfig: str | None = None, boot_delay: float = 1.0) -> int:
    """Tell the story; 0 when every part ended as it should."""
    story = SandboxRun(kubeconfig=kubeconfig, boot_delay=boot_delay)
    with quiet_functions(), contextlib.redirect_stdout(WithoutMetricLines(sys.stdout)), story:
        return tell_the_story(story)


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
    print()
    interrupted, left_for_ec2 = interrupt_a_spot_node(story, watcher)
    print()
    runner = DisruptionRunner(story, REGION)
    emptied = scale_down(story, watcher, runner)
    print()
    nodeclass = next(o for o in objects if o["kind"] == "EC2NodeClass")
    consolidated = consolidate(story, watcher, runner, nodeclass)
    print()
    rolled = consolidated is not None and drift(story, watcher, runner, consolidated)
    released = left_for_ec2 is None or released_after_reclaim(story, left_for_ec2)
    return 0 if interrupted and emptied and consolidated and rolled and released else 1


# --- part two: a spot interruption -------------------------------------------------------------


# --- part two: a spot interruption -------------------------------------------------------------


def _is_ready(pod: dict[str, Any]) -> bool:
    return not pod["metadata"].get("deletionTimestamp") and any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions", [])
    )


def _inflate_pods(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for p in pods if p["metadata"]["name"].startswith(INFLATE)]


def _instance_id(node: dict[str, Any]) -> str:
    return (node.get("spec") or {}).get("providerID", "").rsplit("/", 1)[-1]


def pick_spot_node(watcher: Watcher) -> dict[str, Any] | None:
    """The spot node running the most ``inflate`` pods (the one whose loss hurts most)."""
    spot = {
        n["metadata"]["name"]: n
        for n in watcher.nodes
        if (n["metadata"].get("labels") or {}).get("karpenter.sh/capacity-type") == "spot"
    }
    counts: dict[str, int] = {}
    for pod in _inflate_pods(watcher.pods):
        node = pod["spec"].get("nodeName")
        if node in spot and _is_ready(pod):
            counts[node] = counts.get(node, 0) + 1
    return spot[max(counts, key=counts.__getitem__)] if counts else None


class InterruptionTimeline:
    """Watches the cluster from a thread while the handler runs and narrates each change once,
    with the seconds since the warning was delivered: all of it read from the API server and the
    state table, none of it from the handler's own report."""

    def __init__(self, story: SandboxRun, node: dict[str, Any], claim: dict[str, Any]) -> None:
        from nodewright.cloud.provider import CloudProvider
        from nodewright.cluster.resources import NODECLAIMS, PODS

        self.story = story
        self.store = CloudProvider.shared(story.settings).store
        self.node = node["metadata"]["name"]
        self.claim = claim["metadata"]["name"]
        labels = node["metadata"].get("labels") or {}
        self.offering = tuple(
            labels.get(k, "?")
            for k in (
                "node.kubernetes.io/instance-type",
                "topology.kubernetes.io/zone",
                "karpenter.sh/capacity-type",
            )
        )
        self.claims_before = {c["metadata"]["name"] for c in story.cluster.list(NODECLAIMS)}
        pods = _inflate_pods(story.cluster.list(PODS, namespace="default"))
        self.on_victim = {p["metadata"]["name"] for p in pods if p["spec"].get("nodeName") == self.node}
        self.replicas = len(pods)
        self.fewest_ready = sum(1 for p in pods if _is_ready(p))
        self.ready = self.fewest_ready
        self.on_replacement: frozenset[str] = frozenset()  # ready inflate pods on a replacement node
        self.replacement_instances: set[str] = set()  # instance ids of NodeClaims launched since
        self.evicted: list[str] = []
        self.node_gone_at: float | None = None
        self.claim_gone_at: float | None = None
        # EC2 takes a spot instance itself: the NodeClaim then stays, deleting, until it has.
        self.claim_left_at: float | None = None
        self.warned_at = 0.0
        # Whether the spot_events pass launched capacity; None until it returns. When the scheduling
        # core found room for the node's pods on existing nodes it launches nothing (as Karpenter would).
        self.replacement_launched: bool | None = None
        # Pods already running elsewhere are not news: the timeline narrates only what moves.
        self._seen: set[str] = {f"running-{p['metadata']['name']}" for p in pods if _is_ready(p)}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def say(self, message: str) -> None:
        self.story.say(f"T+{time.monotonic() - self.warned_at:5.2f}s  {message}")

    def once(self, key: str) -> bool:
        if key in self._seen:
            return False
        self._seen.add(key)
        return True

    def start(self) -> None:
        self.warned_at = time.monotonic()
        self._thread = threading.Thread(target=self._watch, name="interruption-timeline", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.tick()  # whatever changed since the thread's last look

    def _watch(self) -> None:
        while not self._stop.is_set():
            try:
                self.tick()
            except Exception as exc:  # a failed read is retried on the next tick
                self.story.say(f"timeline: could not read the cluster ({exc})")
            time.sleep(0.1)

    @property
    def done(self) -> bool:
        """Old node gone, its NodeClaim gone or left for EC2's reclaim, every inflate pod ready (on
        the replacement, if one launched)."""
        return (
            self.node_gone_at is not None
            and (self.claim_gone_at is not None or self.claim_left_at is not None)
            and self.ready == self.replicas
            and self.replacement_launched is not None
            and (bool(self.on_replacement) or not self.replacement_launched)
        )

    def tick(self) -> None:
        from nodewright.cluster.resources import NODECLAIMS, NODES, PODS
        from nodewright.termination.terminate import INSTANCE_GOING_ANNOTATION

        cluster = self.story.cluster
        kind, zone, capacity = self.offering
        if capacity == "spot" and self.store.is_unavailable(kind, zone, capacity) and self.once("offering"):
            self.say(
                f"offering {kind}/{zone}/spot marked unavailable: the replacement and the next plans avoid it"
            )
        claims = {c["metadata"]["name"]: c for c in cluster.list(NODECLAIMS)}
        for name, claim in claims.items():
            if name in self.claims_before:
                continue
            status, labels = claim.get("status") or {}, claim["metadata"].get("labels") or {}
            if status.get("instanceID") and self.once(f"launched-{name}"):
                self.replacement_instances.add(status["instanceID"])
                kind = labels.get("node.kubernetes.io/instance-type")
                capacity_type = labels.get("karpenter.sh/capacity-type")
                where = f"{capacity_type} in {labels.get('topology.kubernetes.io/zone')}"
                self.say(f"replacement NodeClaim {name} launched: {kind} {where} ({status['instanceID']})")
            if status.get("nodeName") and self.once(f"registered-{name}"):
                self.say(f"replacement node {status['nodeName']} registered for {name}")
        nodes = {n["metadata"]["name"]: n for n in cluster.list(NODES)}
        # A node is the replacement by its providerID (as Karpenter matches them): pods may run on it
        # before the provisioner's lifecycle pass marks its NodeClaim Registered.
        launched = self.replacement_instances
        replacement_nodes = {name for name, n in nodes.items() if _instance_id(n) in launched}
        node = nodes.get(self.node)
        if node is not None:
            taints = (node.get("spec") or {}).get("taints") or []
            if any(t.get("key") == "karpenter.sh/disrupted" for t in taints) and self.once("tainted"):
                self.say(f"node {self.node} tainted karpenter.sh/disrupted:NoSchedule")
            if (node.get("spec") or {}).get("unschedulable") and self.once("cordoned"):
                self.say(f"node {self.node} cordoned")
        elif self.once("node-gone"):
            self.node_gone_at = time.monotonic()
            self.say(f"node {self.node} gone")
        claim = claims.get(self.claim)
        if claim is not None and claim["metadata"].get("deletionTimestamp") and self.once("claim-deleting"):
            self.say(f"NodeClaim {self.claim} deleting (its termination finalizer holds it until drained)")
        annotations = ((claim or {}).get("metadata") or {}).get("annotations") or {}
        if (
            node is None
            and claim is not None
            and annotations.get(INSTANCE_GOING_ANNOTATION) == "true"
            and self.once("claim-left")
        ):
            self.claim_left_at = time.monotonic()
            self.say(
                f"NodeClaim {self.claim} stays, deleting, until EC2 reclaims its instance "
                f"({INSTANCE_GOING_ANNOTATION}): garbage collection will not take it for a leak"
            )
        if claim is None and self.once("claim-gone"):
            self.claim_gone_at = time.monotonic()
            self.say(f"NodeClaim {self.claim} gone")
        pods = _inflate_pods(cluster.list(PODS, namespace="default"))
        by_name = {p["metadata"]["name"]: p for p in pods}
        for name in sorted(self.on_victim):
            pod = by_name.get(name)
            if (pod is None or pod["metadata"].get("deletionTimestamp")) and self.once(f"evicted-{name}"):
                self.evicted.append(name)
                self.say(f"pod {name} evicted ({len(self.evicted)}/{len(self.on_victim)})")
        ready = [p for p in pods if _is_ready(p)]
        self.ready = len(ready)
        self.fewest_ready = min(self.fewest_ready, len(ready))
        on_replacement = {
            p["metadata"]["name"] for p in ready if p["spec"].get("nodeName") in replacement_nodes
        }
        self.on_replacement = frozenset(on_replacement)
        for pod in ready:
            name, where = pod["metadata"]["name"], pod["spec"].get("nodeName")
            if name not in self.on_victim and self.once(f"running-{name}"):
                self.say(
                    f"pod {name} Running on {where} "
                    f"({'replacement' if where in replacement_nodes else 'existing capacity'})"
                )


def interrupt_a_spot_node(story: SandboxRun, watcher: Watcher) -> tuple[bool, str | None]:
    """Part two of the story: whether the interruption was handled end to end, once, and the
    NodeClaim left for EC2's reclaim (``released_after_reclaim`` checks it at the story's end)."""
    from nodewright.cluster.resources import NODECLAIMS, PDBS

    from sandbox.runtime.lambdas import LambdaContext, load_function

    cluster = story.cluster
    story.say("Part two: EC2 reclaims a spot node")
    cluster.create(
        PDBS,
        {
            "metadata": {"name": "inflate", "namespace": "default"},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "inflate"}}},
        },
        namespace="default",
    )
    story.say("applied PodDisruptionBudget inflate: maxUnavailable 1")
    watcher.tick()
    node = pick_spot_node(watcher)
    if node is None:
        story.say("no spot node runs inflate pods: nothing to interrupt")
        return False, None
    instance_id = _instance_id(node)
    claim = next(c for c in watcher.claims if (c.get("status") or {}).get("instanceID") == instance_id)
    timeline = InterruptionTimeline(story, node, claim)
    event = events.spot_warning(instance_id, REGION)
    kind, zone, capacity = timeline.offering
    story.say(
        f"node {timeline.node} ({kind} {capacity} in {zone}, {instance_id}) runs "
        f"{len(timeline.on_victim)} inflate pod(s); NodeClaim {timeline.claim}"
    )
    spot_events = load_function("spot_events")
    timeline.start()
    story.reclaim_spot_instance(instance_id, NOTICE_SECONDS)
    try:  # the timeline's thread must not outlive the story, whatever happens here
        timeline.say(f"{events.SPOT_WARNING} received for {instance_id} (event {event['id']}) → spot_events")
        result = spot_events.handler(event, LambdaContext(FUNCTION_SECONDS, "nodewright-spot-events"))
        handled = time.monotonic() - timeline.warned_at
        outcome = result.get("outcome") or {}
        replacement = outcome.get("replacement") or {}
        created = replacement.get("nodeClaimsCreated") or []
        timeline.replacement_launched = bool(created)
        steps = [s for t in outcome.get("terminating", []) for s in t.get("steps", [])]
        if created:
            launched = f"NodeClaim {', '.join(created)}"
        elif replacement.get("stoppedEarly"):
            # The replacement pass ran out of the invocation's time (a loaded machine): say so, rather than
            # claim the pods fit elsewhere; the provisioner's next pass places them.
            launched = f"nothing yet: the replacement pass stopped early ({replacement['stoppedEarly']})"
        elif not replacement.get("pendingPods") and timeline.evicted:
            # A loaded machine: the provisioner's termination controller drained the deleting NodeClaim
            # before this invocation's replacement pass read the node (Karpenter orders them no better
            # for an interruption); its pods are placed as any pending pod is.
            launched = (
                f"nothing: the node's {len(timeline.evicted)} pod(s) were evicted before the replacement "
                "pass read it (the termination controller got there first)"
            )
        else:
            launched = (
                f"nothing: the scheduling core placed the node's {replacement.get('pendingPods', 0)} pod(s) "
                "on existing capacity"
            )
        timeline.say(
            f"spot_events returned: {result.get('disposition')}; marked unavailable "
            f"{', '.join(outcome.get('markedUnavailable', [])) or 'nothing'}; launched before any eviction: "
            f"{launched}; first pass: {', '.join(steps) or '-'}"
        )
        where = "the replacement" if created else "existing capacity"
        story.wait_for(f"the drain to finish and inflate to run on {where}", lambda: timeline.done, 60)
    finally:
        timeline.stop()
    watcher.tick(narrate=False)  # the timeline told part two; part three must not retell it
    finished = (timeline.node_gone_at or 0.0) - timeline.warned_at

    claims_before = {c["metadata"]["name"] for c in cluster.list(NODECLAIMS)}
    launches_before = len(story.fleet_calls)
    queue = load_function("interruption")
    queue_url = story.sandbox.aws.interruption_queue_url
    response = queue.handler(
        events.sqs_event(
            [
                events.sqs_record(
                    json.dumps(event), source_arn=events.queue_arn(queue_url, REGION), region=REGION
                )
            ]
        ),
        LambdaContext(FUNCTION_SECONDS, "nodewright-interruption"),
    )
    again = spot_events.handler(event, LambdaContext(FUNCTION_SECONDS, "nodewright-spot-events"))
    unchanged = {c["metadata"]["name"] for c in cluster.list(NODECLAIMS)} == claims_before
    no_launch = len(story.fleet_calls) == launches_before
    timeline.say(
        f"the same event via the queue (interruption function): batchItemFailures "
        f"{response.get('batchItemFailures')}; redelivered to spot_events: {again.get('disposition')}; "
        f"NodeClaims {'unchanged' if unchanged else 'CHANGED'}, {'no' if no_launch else 'a NEW'} CreateFleet"
    )

    print()
    print("Interruption timeline")
    print(f"  warning → spot_events returned:   {handled:6.2f}s")
    if timeline.node_gone_at and (timeline.claim_gone_at or timeline.claim_left_at):
        print(
            f"  warning → node drained and gone: {finished:6.2f}s of the {NOTICE_SECONDS:.0f}s notice "
            f"({NOTICE_SECONDS - finished:.0f}s to spare)"
        )
        kept = "gone" if timeline.claim_gone_at else "kept, deleting, until EC2 reclaims the instance"
        print(f"  NodeClaim {timeline.claim}: {kept}")
    else:
        print(f"  node or NodeClaim NOT done after {time.monotonic() - timeline.warned_at:.0f}s")
    print(
        f"  pods evicted: {len(timeline.evicted)}/{len(timeline.on_victim)}; inflate pods on a replacement "
        f"node: {len(timeline.on_replacement)}; ready: {timeline.ready}/{timeline.replicas}"
    )
    print(
        f"  PodDisruptionBudget: never fewer than {timeline.fewest_ready}/{timeline.replicas} inflate pods "
        f"ready (maxUnavailable 1 allows {timeline.replicas - 1})"
    )
    handled_once = (
        timeline.done
        and result.get("disposition") == "acted"
        and unchanged
        and no_launch
        and again.get("disposition") == "duplicate"
        and not response.get("batchItemFailures")
        and timeline.fewest_ready >= timeline.replicas - 1
    )
    left = timeline.claim if timeline.claim_left_at and not timeline.claim_gone_at else None
    return handled_once, left


def released_after_reclaim(story: SandboxRun, claim: str) -> bool:
    """The interrupted node's NodeClaim, kept while EC2 had not reclaimed its instance, is gone
    once it has (the sandbox's EC2 reclaims two minutes after the warning; the next pass of a
    flow then releases the NodeClaim). True when it went."""
    from nodewright.cluster.resources import NODECLAIMS
    from nodewright.termination.terminate import RECLAIM_GRACE_SECONDS

    gone = story.wait_for(
        f"NodeClaim {claim} to go after EC2's reclaim",
        lambda: story.cluster.find(NODECLAIMS, claim) is None,
        NOTICE_SECONDS + RECLAIM_GRACE_SECONDS,
    )
    if gone:
        story.say(f"NodeClaim {claim} gone: EC2 reclaimed its instance, and the next pass released it")
    return gone


def scale_down(story: SandboxRun, watcher: Watcher, runner: DisruptionRunner) -> bool:
    """Part three: fewer inflate pods leave nodes empty, and the real disruption handler removes
    them within the NodePool's budget; True when exactly the empty nodes went."""
    from nodewright.cluster.resources import NODES
    from nodewright.state.pods import reschedulable_by_node

    from sandbox.scenarios.demo_disruption import TICK_SECONDS
    from sandbox.scenarios.workloads import DEPLOYMENTS

    story.cluster.patch(
        DEPLOYMENTS, "inflate", {"spec": {"replicas": SCALED_DOWN_REPLICAS}}, namespace="default"
    )
    story.say(f"Part three: deployment inflate scaled down to {SCALED_DOWN_REPLICAS} replicas")

    def scaled() -> bool:
        watcher.tick(narrate=False)
        return len(_inflate_pods(watcher.pods)) == SCALED_DOWN_REPLICAS

    story.wait_for("inflate to scale down", scaled, 30)
    movable = reschedulable_by_node(story.cluster.list_pods())  # the pods emptiness counts
    empty: list[str] = []
    for node in sorted(watcher.nodes, key=lambda n: n["metadata"]["name"]):
        labels = node["metadata"].get("labels") or {}
        name = node["metadata"]["name"]
        count = len(movable.get(name, []))
        if not count:
            empty.append(name)
        story.say(
            f"node {name} ({labels.get('node.kubernetes.io/instance-type')} "
            f"{labels.get('karpenter.sh/capacity-type')}, NodePool {labels.get('karpenter.sh/nodepool')}): "
            f"{count} pod(s){' — empty' if not count else ''}"
        )
    story.say(
        "disruption: the real handler (every minute on AWS); NodePool default removes a node empty for "
        "consolidateAfter 30s, at most 10% of its nodes at once (its default budget)"
    )
    started = time.monotonic()
    disrupted: list[dict[str, Any]] = []
    commands: list[dict[str, Any]] = []
    saved = 0.0
    invocations = 0
    while True:  # back to back, as the every-minute schedule would invoke it
        result = runner.invoke()
        invocations += 1
        disrupted += result.get("disrupted", [])
        commands += result.get("decisions", [])
        saved += sum(a.get("pricePerHour") or 0.0 for a in result.get("disrupted", []))
        remaining = {n["metadata"]["name"] for n in story.cluster.list(NODES)}
        if not remaining & set(empty) or time.monotonic() - started > DISRUPTION_WAIT_SECONDS:
            break
        for claim, why in sorted(result.get("held", {}).items()):
            story.say(f"kept NodeClaim {claim} for now: {why}")
        story.say(
            f"the next scheduled invocation looks again (every minute on AWS; here in {TICK_SECONDS:.0f}s)"
        )
        time.sleep(TICK_SECONDS)
    watcher.tick(narrate=False)
    removed = sorted(a["node"] for a in disrupted)
    story.say(
        f"disruption: {invocations} invocation(s), {time.monotonic() - started:.1f}s: {len(removed)} empty "
        f"node(s) removed one at a time, ${saved:.4f}/h saved; {len(remaining)} node(s) left; "
        f"{len(commands)} drift/consolidation command(s) started meanwhile"
    )
    return removed == sorted(empty) and not remaining & set(empty)


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

    def tick(self, *, narrate: bool = True) -> None:
        """Read the cluster; say what changed, or (``narrate=False``) only note it as told."""
        from nodewright.cluster.resources import NODECLAIMS, NODES, PODS

        cluster = self.story.cluster
        say = self.story.say if narrate else (lambda _message: None)
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
                values: list[str] = next(
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
                node_labels: dict[str, str] = next(
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
    story: SandboxRun,
    pending_since: dict[str, float],
    pods: list[dict[str, Any]],
    claims: list[dict[str, Any]],
) -> list[float]:
    """Per pod: seconds from first seen pending to the CreateFleet request of the NodeClaim whose
    node it is bound to (``claims_of_pods``)."""
    fleet_at: dict[str, float] = {}
    for moment, claim in story.fleet_calls:
        fleet_at.setdefault(claim, moment)
    return [
        max(0.0, fleet_at[claim] - pending_since[pod])
        for pod, claim in claims_of_pods(pods, claims).items()
        if claim in fleet_at and pod in pending_since
    ]


def offering_prices(story: SandboxRun) -> dict[tuple[str, str, str], float]:
    """(instance type, zone, capacity type) → $/h, as the functions price them."""
    from nodewright.cloud.provider import CloudProvider
    from nodewright.cluster.resources import EC2NODECLASSES

    provider = CloudProvider.shared(story.settings)
    return {
        (t.name, o.zone, o.capacity_type): o.price
        for nodeclass in story.cluster.list(EC2NODECLASSES)
        for t in provider.instance_types(nodeclass)
        for o in t.offerings
    }


def render_summary(
    story: SandboxRun,
    pods: list[dict[str, Any]],
    claims: list[dict[str, Any]],
    nodes: list[dict[str, Any]],
    pending_since: dict[str, float],
) -> str:
    from collections import Counter

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
    offerings = offering_prices(story)
    lines += ["", "Nodes", f"  {'type':<14} {'zone':<12} {'capacity':<10} {'count':>5} {'$/h each':>9}"]
    cost = 0.0
    for (name, zone, capacity_type), count in sorted(groups.items()):
        price = offerings.get((name, zone, capacity_type), 0.0)
        cost += price * count
        lines.append(f"  {name:<14} {zone:<12} {capacity_type:<10} {count:>5} {price:>9.4f}")
    latencies = pending_to_launch(story, pending_since, pods, claims)
    lines += [
        "",
        f"Cluster cost: ${cost:.4f}/h for {sum(groups.values())} node(s)",
        f"Pending → CreateFleet: p50 {percentile(latencies, 50):.2f}s, p99 {percentile(latencies, 99):.2f}s "
        f"over {len(latencies)} pod(s) that got new capacity",
    ]
    return "\n".join(lines)
