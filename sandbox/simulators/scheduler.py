"""A kube-scheduler: binds pending pods to nodes where they fit, or marks them Unschedulable.

Filters, as the default scheduler's plugins have them (and with its reason strings):
NodeUnschedulable (cordoned nodes), NodeName, NodeAffinity (nodeSelector and required node
affinity, matchExpressions and matchFields), TaintToleration (NoSchedule/NoExecute taints,
including ``node.kubernetes.io/not-ready``), NodeResourcesFit (requests, init containers and
overhead against allocatable minus the pods already bound, plus the pod count), PodTopologySpread
(``DoNotSchedule`` constraints, domains from the nodes that pass the pod's node affinity),
InterPodAffinity (required affinity and anti-affinity on any topology key, both directions) and
VolumeBinding (claims, generic ephemeral volumes' included: ``sandbox/simulators/volumebinding.py``).
Score: least allocated (the default), ties broken by node name so runs are repeatable.

When no node fits, the pod gets ``PodScheduled=False``, reason ``Unschedulable`` and the real
message shape: ``0/3 nodes are available: 1 node(s) were unschedulable, 2 Insufficient cpu.``

Its writes are kube-scheduler's (v1.30-v1.35, ``pkg/scheduler/schedule_one.go``), with the same
synchronicity, because what a slow admission webhook costs the scheduler depends on it:

* one scheduling loop, one pod at a time; for a pod that fits nowhere, ``handleSchedulingFailure``
  records a ``FailedScheduling`` Event (the events recorder: queued, written by the broadcaster,
  never waited for: ``sandbox/simulators/recorder.py``) and then, **synchronously in the loop**,
  patches ``pods/status`` with the ``PodScheduled`` condition when its status, reason or message
  changed (``updatePod``: nothing is written otherwise; ``lastTransitionTime`` kept while the status
  stays False). Every failed attempt records the Event; the recorder makes repeats a series.
  (kube-scheduler v1.34+ moves that patch off the loop only with the ``SchedulerAsyncAPICalls``
  feature gate, beta and off by default.)
* a pod that fits is bound through ``pods/binding`` and a ``Scheduled`` Event is recorded.
  kube-scheduler binds in a goroutine of its own; this simulator binds in its loop: slower than
  kube-scheduler, never faster.
* writes go through a client-side rate limiter of 50 requests a second with bursts of 100
  (kube-scheduler's ``clientConnection`` defaults); the Events through the recorder's own client and
  limiter. The lists each pass starts with stand in for kube-scheduler's informers and are not
  limited.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from kubernetes.client.exceptions import ApiException
from kubernetes.utils.quantity import parse_quantity

from sandbox.apiserver.admission import cluster_now
from sandbox.simulators.kube import MERGE_PATCH, STRATEGIC_MERGE_PATCH, Kube, core
from sandbox.simulators.loop import ReconcileLoop
from sandbox.simulators.recorder import CLIENT_BURST, CLIENT_QPS, RateLimiter, Recorder, truncate_note

if TYPE_CHECKING:
    from sandbox.simulators.volumebinding import Volumes

DEFAULT_SCHEDULER = "default-scheduler"
HOSTNAME = "kubernetes.io/hostname"
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
# How long a pod this scheduler bound counts on its node while the informer still shows it pending.
ASSUMED_SECONDS = 30.0
Pod = dict[str, Any]
Node = dict[str, Any]


def now() -> str:
    return cluster_now().strftime("%Y-%m-%dT%H:%M:%SZ")


# --- resources ---------------------------------------------------------------------------------


def _container_requests(container: dict[str, Any]) -> Counter:
    resources = container.get("resources") or {}
    requests = dict(resources.get("limits") or {})  # limits stand in for missing requests
    requests.update(resources.get("requests") or {})
    return Counter({name: parse_quantity(value) for name, value in requests.items()})


def pod_requests(pod: Pod) -> Counter:
    """Requests as the scheduler counts them: max(containers, largest init container) + overhead."""
    spec = pod.get("spec") or {}
    total: Counter = Counter()
    for container in spec.get("containers") or []:
        total.update(_container_requests(container))
    for init in spec.get("initContainers") or []:
        for name, value in _container_requests(init).items():
            total[name] = max(total[name], value)
    for name, value in (spec.get("overhead") or {}).items():
        total[name] += parse_quantity(value)
    return total


def node_allocatable(node: Node) -> dict[str, Decimal]:
    status = node.get("status") or {}
    values = status.get("allocatable") or status.get("capacity") or {}
    return {name: parse_quantity(value) for name, value in values.items()}


def is_active(pod: Pod) -> bool:
    """Pods that hold resources on their node (terminating ones too, until they are gone)."""
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


# --- label and field matching ----------------------------------------------------------------


def match_expression(labels: dict[str, str], expression: dict[str, Any]) -> bool:
    key, operator = expression.get("key", ""), expression.get("operator", "")
    values = expression.get("values") or []
    present = key in labels
    if operator == "In":
        return present and labels[key] in values
    if operator == "NotIn":
        return not present or labels[key] not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt") and present and values:
        try:
            actual, bound = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return actual > bound if operator == "Gt" else actual < bound
    return False


def match_label_selector(labels: dict[str, str], selector: dict[str, Any] | None) -> bool:
    """metav1.LabelSelector semantics; an empty selector matches everything, None matches nothing."""
    if selector is None:
        return False
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    return all(match_expression(labels, e) for e in selector.get("matchExpressions") or [])


def match_node_selector_term(node: Node, term: dict[str, Any]) -> bool:
    labels = node.get("metadata", {}).get("labels") or {}
    fields = {"metadata.name": node.get("metadata", {}).get("name", "")}
    expressions = term.get("matchExpressions") or []
    field_expressions = term.get("matchFields") or []
    if not expressions and not field_expressions:
        return False  # an empty term matches no objects
    return all(match_expression(labels, e) for e in expressions) and all(
        match_expression(fields, e) for e in field_expressions
    )


def matches_node_affinity(pod: Pod, node: Node) -> bool:
    """nodeSelector AND required node affinity (its terms ORed)."""
    spec = pod.get("spec") or {}
    labels = node.get("metadata", {}).get("labels") or {}
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if not required:
        return True
    return any(match_node_selector_term(node, term) for term in required.get("nodeSelectorTerms") or [])


def tolerates(tolerations: Iterable[dict[str, Any]], taint: dict[str, Any]) -> bool:
    for toleration in tolerations:
        if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
            continue
        operator = toleration.get("operator") or "Equal"
        key = toleration.get("key") or ""
        if key == "" and operator == "Exists":
            return True
        if key != taint.get("key"):
            continue
        if operator == "Exists" or (toleration.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def untolerated_taint(pod: Pod, node: Node) -> dict[str, Any] | None:
    """The first NoSchedule/NoExecute taint of ``node`` the pod does not tolerate."""
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(tolerations, taint):
            return taint
    return None


# --- the snapshot the filters work on ----------------------------------------------------------


@dataclass
class ClusterState:
    """Nodes and the pods bound to them; updated as this pass binds pods.

    What every (pod, node) check would otherwise recompute is kept as it changes: each node's used
    requests, and the bound pods whose required anti-affinity repels others (a burst of 500 pending
    pods made every pass sum and scan all bound pods once per pod and node); and, for the pass,
    each node's allocatable and each pod's requests parsed once, as kube-scheduler keeps them in
    its NodeInfo and PodInfo (600 pending pods over 200 nodes parsed them 120,000 times a pass)."""

    nodes: list[Node]
    bound: dict[str, list[Pod]] = field(default_factory=dict)  # node name -> active pods bound to it
    _used: dict[str, Counter] = field(default_factory=dict)
    # (bound pod with required anti-affinity, its node)
    repelling: list[tuple[Pod, Node]] = field(default_factory=list)
    _by_name: dict[str, Node] = field(default_factory=dict)  # filled when a repelling pod is first added
    volumes: Volumes | None = None  # the pass's claims, PVs and classes (None: no pod mounts any)
    _allocatable: dict[str, dict[str, Decimal]] = field(default_factory=dict)  # node name -> parsed
    _requests: dict[int, tuple[Pod, Counter]] = field(default_factory=dict)  # id(pod) -> (pod, parsed)

    @classmethod
    def build(cls, nodes: list[Node], pods: list[Pod]) -> ClusterState:
        state = cls(nodes=sorted(nodes, key=lambda n: n["metadata"]["name"]))
        state.bound = {n["metadata"]["name"]: [] for n in nodes}
        for pod in pods:
            node_name = (pod.get("spec") or {}).get("nodeName")
            if node_name in state.bound and is_active(pod):
                state._add(pod, node_name)
        return state

    def allocatable(self, node: Node) -> dict[str, Decimal]:
        """``node_allocatable(node)``, parsed once a pass (read only)."""
        name = node["metadata"]["name"]
        if name not in self._allocatable:
            self._allocatable[name] = node_allocatable(node)
        return self._allocatable[name]

    def requests(self, pod: Pod) -> Counter:
        """``pod_requests(pod)``, parsed once a pass (read only); the pod is kept with it, so its id
        stays its own for the pass."""
        found = self._requests.get(id(pod))
        if found is None or found[0] is not pod:
            found = self._requests[id(pod)] = (pod, pod_requests(pod))
        return found[1]

    def used(self, node_name: str) -> Counter:
        """The requests of the pods bound to ``node_name`` (read only: the state's own count)."""
        return self._used.get(node_name) or Counter()

    def assume(self, pod: Pod, node_name: str) -> None:
        placed = {**pod, "spec": {**(pod.get("spec") or {}), "nodeName": node_name}}
        self._add(placed, node_name)

    def _add(self, pod: Pod, node_name: str) -> None:
        self.bound.setdefault(node_name, []).append(pod)
        self._used.setdefault(node_name, Counter()).update(self.requests(pod))
        if _terms(pod, "podAntiAffinity"):
            if not self._by_name:
                self._by_name = {n["metadata"]["name"]: n for n in self.nodes}
            if node_name in self._by_name:
                self.repelling.append((pod, self._by_name[node_name]))


def _topology_value(node: Node, key: str) -> str | None:
    return (node.get("metadata", {}).get("labels") or {}).get(key)


def _pod_matches(pod: Pod, selector: dict[str, Any] | None, namespaces: Collection[str]) -> bool:
    meta = pod.get("metadata") or {}
    return meta.get("namespace") in namespaces and match_label_selector(meta.get("labels") or {}, selector)


def _spread_ok(pod: Pod, node: Node, state: ClusterState) -> bool:
    namespace = pod["metadata"].get("namespace", "default")
    for constraint in (pod.get("spec") or {}).get("topologySpreadConstraints") or []:
        if constraint.get("whenUnsatisfiable", "DoNotSchedule") != "DoNotSchedule":
            continue
        key = constraint.get("topologyKey", "")
        value = _topology_value(node, key)
        if value is None:
            return False
        selector = constraint.get("labelSelector")
        counts: Counter = Counter()
        for candidate in state.nodes:  # domains: nodes that pass the pod's node affinity (policy Honor)
            domain = _topology_value(candidate, key)
            if domain is None or not matches_node_affinity(pod, candidate):
                continue
            counts[domain] += sum(
                _pod_matches(p, selector, [namespace])
                for p in state.bound.get(candidate["metadata"]["name"], [])
            )
        minimum = min(counts.values()) if counts else 0
        if counts[value] + 1 - minimum > int(constraint.get("maxSkew", 1)):
            return False
    return True


def _terms(pod: Pod, kind: str) -> list[dict[str, Any]]:
    affinity = ((pod.get("spec") or {}).get("affinity") or {}).get(kind) or {}
    return affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or []


def _term_namespaces(owner: Pod, term: dict[str, Any]) -> list[str]:
    return term.get("namespaces") or [owner["metadata"].get("namespace", "default")]


def _pods_in_domain(state: ClusterState, key: str, value: str) -> Iterable[Pod]:
    for node in state.nodes:
        if _topology_value(node, key) == value:
            yield from state.bound.get(node["metadata"]["name"], [])


def _anti_affinity_ok(pod: Pod, node: Node, state: ClusterState) -> bool:
    for term in _terms(pod, "podAntiAffinity"):
        value = _topology_value(node, term.get("topologyKey", ""))
        if value is None:
            continue
        namespaces = _term_namespaces(pod, term)
        selector = term.get("labelSelector")
        if any(
            _pod_matches(p, selector, namespaces) for p in _pods_in_domain(state, term["topologyKey"], value)
        ):
            return False
    # Symmetry: an existing pod's anti-affinity also keeps this pod away from its domain.
    for existing, existing_node in state.repelling:
        for term in _terms(existing, "podAntiAffinity"):
            key = term.get("topologyKey", "")
            if (
                _topology_value(existing_node, key) is not None
                and _topology_value(existing_node, key) == _topology_value(node, key)
                and _pod_matches(pod, term.get("labelSelector"), _term_namespaces(existing, term))
            ):
                return False
    return True


def _affinity_ok(pod: Pod, node: Node, state: ClusterState) -> bool:
    for term in _terms(pod, "podAffinity"):
        key = term.get("topologyKey", "")
        value = _topology_value(node, key)
        if value is None:
            return False
        namespaces = _term_namespaces(pod, term)
        selector = term.get("labelSelector")
        if any(_pod_matches(p, selector, namespaces) for p in _pods_in_domain(state, key, value)):
            continue
        # The first pod of a group that selects itself may go anywhere, as in the real scheduler.
        anywhere = any(_pod_matches(p, selector, namespaces) for pods in state.bound.values() for p in pods)
        if anywhere or not _pod_matches(pod, selector, namespaces):
            return False
    return True


def filter_node(pod: Pod, node: Node, state: ClusterState) -> list[str]:
    """Why ``pod`` cannot go on ``node`` (the scheduler's reason strings); empty when it fits."""
    spec = node.get("spec") or {}
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    if spec.get("unschedulable") and not tolerates(
        tolerations, {"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"}
    ):
        return ["node(s) were unschedulable"]
    wanted = (pod.get("spec") or {}).get("nodeName")
    if wanted and wanted != node["metadata"]["name"]:
        return ["node(s) didn't match the requested node name"]
    if not matches_node_affinity(pod, node):
        return ["node(s) didn't match Pod's node affinity/selector"]
    taint = untolerated_taint(pod, node)
    if taint is not None:
        return [f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value') or ''}}}"]
    name = node["metadata"]["name"]
    allocatable = state.allocatable(node)
    used = state.used(name)
    reasons = []
    if len(state.bound.get(name, [])) + 1 > allocatable.get("pods", Decimal(110)):
        reasons.append("Too many pods")
    for resource, amount in sorted(state.requests(pod).items()):
        if amount > 0 and used[resource] + amount > allocatable.get(resource, Decimal(0)):
            reasons.append(f"Insufficient {resource}")
    if reasons:
        return reasons
    if state.volumes is not None and (reasons := state.volumes.node_reasons(pod, node)):
        return reasons
    if not _spread_ok(pod, node, state):
        return ["node(s) didn't match pod topology spread constraints"]
    if not _affinity_ok(pod, node, state):
        return ["node(s) didn't match pod affinity rules"]
    if not _anti_affinity_ok(pod, node, state):
        return ["node(s) didn't match pod anti-affinity rules"]
    return []


def _score(pod: Pod, node: Node, state: ClusterState) -> float:
    """LeastAllocated: the mean free fraction of cpu and memory after placing the pod."""
    allocatable = state.allocatable(node)
    used = state.used(node["metadata"]["name"]) + state.requests(pod)
    fractions = [
        float(1 - used[r] / allocatable[r]) for r in ("cpu", "memory") if allocatable.get(r, Decimal(0)) > 0
    ]
    return sum(fractions) / len(fractions) if fractions else 0.0


def choose_node(pod: Pod, state: ClusterState) -> tuple[str | None, str]:
    """(node name, "") when the pod fits somewhere, else (None, the FailedScheduling message)."""
    if not state.nodes:
        return None, "no nodes available to schedule pods"
    if state.volumes is not None and (unresolvable := state.volumes.prefilter(pod)):
        return None, f"0/{len(state.nodes)} nodes are available: {unresolvable}."
    feasible: list[Node] = []
    failures: Counter = Counter()
    for node in state.nodes:
        reasons = filter_node(pod, node, state)
        if reasons:
            failures.update(reasons)
        else:
            feasible.append(node)
    if feasible:
        best = max(feasible, key=lambda n: (_score(pod, n, state), [-ord(c) for c in n["metadata"]["name"]]))
        return best["metadata"]["name"], ""
    detail = ", ".join(
        sorted(f"{count} {reason}" for reason, count in failures.items())
    )  # sorted as kube-scheduler does
    return None, f"0/{len(state.nodes)} nodes are available: {detail}."


def is_pending_for_us(pod: Pod) -> bool:
    spec = pod.get("spec") or {}
    return (
        not spec.get("nodeName")
        and (spec.get("schedulerName") or DEFAULT_SCHEDULER) == DEFAULT_SCHEDULER
        and not pod["metadata"].get("deletionTimestamp")
        and (pod.get("status") or {}).get("phase", "Pending") == "Pending"
    )


def _pod_order(pod: Pod) -> tuple[int, str, str]:
    """The scheduling queue's order: priority first, then age."""
    return (
        -int((pod.get("spec") or {}).get("priority") or 0),
        pod["metadata"].get("creationTimestamp") or "",
        pod["metadata"]["name"],
    )


class Scheduler(ReconcileLoop):
    """Binds pods through the ``pods/binding`` subresource, as kube-scheduler does."""

    name = "scheduler"
    watch_paths = (core("pods"), core("nodes"), core("persistentvolumeclaims"))
    # Pods and nodes from the informers, as kube-scheduler's cache; claims, volumes and classes
    # listed, in a pass with a pending pod that mounts a claim.
    informed_paths = (core("pods"), core("nodes"))

    def __init__(self, kube: Kube, resync: float = 1.0) -> None:
        super().__init__(kube, resync)
        self.bound_count = 0
        # kube-scheduler's assumed pods: uid → (node, when bound). A binding answers a Status, not
        # the pod, so no resourceVersion to wait for: the pod counts on its node until the informer
        # shows it bound or gone.
        self._assumed: dict[str, tuple[str, float]] = {}
        # time.monotonic() of each PodScheduled=False status write that returned (the benchmark's count)
        self.marked_unschedulable: list[float] = []
        self.recorder = Recorder(kube, DEFAULT_SCHEDULER)
        self.limiter = RateLimiter(CLIENT_QPS, CLIENT_BURST)

    def start(self) -> None:
        self.recorder.start()
        super().start()

    def signal_stop(self) -> None:
        self.recorder.signal_stop()
        super().signal_stop()

    def stop(self, timeout: float = 10.0) -> None:
        super().stop(timeout)
        self.recorder.stop(timeout)

    def reconcile(self) -> None:
        from sandbox.simulators.volumebinding import claim_names

        nodes = self.view(core("nodes"))
        pods = self._with_assumed(self.view(core("pods")))
        state = ClusterState.build(nodes, pods)
        pending = sorted((p for p in pods if is_pending_for_us(p)), key=_pod_order)
        if any(next(claim_names(pod), None) for pod in pending):
            state.volumes = self._volumes()  # VolumeBinding reads them only for a pod that mounts a claim
        for pod in pending:
            node_name, message = choose_node(pod, state)
            if node_name:
                if state.volumes is not None and self._volumes_wait(pod, node_name, state.volumes):
                    continue
                if self._bind(pod, node_name):
                    state.assume(pod, node_name)
            else:
                self._mark_unschedulable(pod, message)

    def _with_assumed(self, pods: list[Pod]) -> list[Pod]:
        """The informer's pods, each this scheduler bound shown on its node until the informer has
        caught up (then, or once the pod is gone, it is forgotten)."""
        now_ = time.monotonic()
        shown: list[Pod] = []
        still: dict[str, tuple[str, float]] = {}
        for pod in pods:
            uid = pod["metadata"].get("uid", "")
            assumed = self._assumed.get(uid)
            spec = pod.get("spec") or {}
            if assumed is not None and not spec.get("nodeName") and now_ - assumed[1] < ASSUMED_SECONDS:
                still[uid] = assumed
                shown.append({**pod, "spec": {**spec, "nodeName": assumed[0]}})
            else:
                shown.append(pod)
        self._assumed = still
        return shown

    def _volumes(self) -> Volumes:
        from sandbox.simulators.volumebinding import Volumes

        claims, _ = self.kube.list(core("persistentvolumeclaims"))
        volumes, _ = self.kube.list(core("persistentvolumes"))
        classes, _ = self.kube.list("/apis/storage.k8s.io/v1/storageclasses")
        return Volumes.build(claims, volumes, classes)

    def _volumes_wait(self, pod: Pod, node_name: str, volumes: Volumes) -> bool:
        """VolumeBinding's PreBind: the pod's unbound WaitForFirstConsumer claims get the chosen node
        (the provisioner makes their volumes there); the pod waits for them to be bound."""
        from sandbox.simulators.volumebinding import SELECTED_NODE

        unbound = volumes.unbound_delayed(pod)
        for claim in unbound:
            meta = claim["metadata"]
            if (meta.get("annotations") or {}).get(SELECTED_NODE):
                continue
            self.limiter.wait(self._stop)
            patch = {
                "metadata": {
                    "resourceVersion": meta["resourceVersion"],
                    "annotations": {SELECTED_NODE: node_name},
                }
            }
            try:
                self.kube.patch(
                    core("persistentvolumeclaims", meta["namespace"], meta["name"]), patch, MERGE_PATCH
                )
            except ApiException as exc:
                if exc.status not in (404, 409):
                    raise
        return bool(unbound)

    def _bind(self, pod: Pod, node_name: str) -> bool:
        meta = pod["metadata"]
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": meta["name"], "namespace": meta["namespace"], "uid": meta.get("uid")},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node_name},
        }
        self.limiter.wait(self._stop)
        try:
            self.kube.create(core("pods", meta["namespace"], meta["name"], "binding"), body)
        except ApiException as exc:
            if exc.status in (404, 409):  # deleted meanwhile, or bound by someone else
                return False
            raise
        self.bound_count += 1
        self._assumed[meta.get("uid", "")] = (node_name, time.monotonic())
        self.recorder.eventf(
            pod,
            "Normal",
            "Scheduled",
            "Binding",
            f"Successfully assigned {meta['namespace']}/{meta['name']} to {node_name}",
        )
        return True

    def _mark_unschedulable(self, pod: Pod, message: str) -> None:
        """``handleSchedulingFailure``: the Event (queued: never waited for), then the status write
        (in the loop: the next pod waits for it, and for any admission webhook it calls)."""
        self.recorder.eventf(pod, "Warning", "FailedScheduling", "Scheduling", truncate_note(message))
        current = next(
            (c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") == "PodScheduled"),
            None,
        )
        if current is not None and (
            current.get("status"),
            current.get("reason"),
            current.get("message"),
            current.get("lastProbeTime"),
        ) == ("False", "Unschedulable", message, None):
            return  # podutil.UpdatePodCondition: nothing changed, nothing written
        same_status = current is not None and current.get("status") == "False"
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": message,
            "lastProbeTime": None,
            "lastTransitionTime": current.get("lastTransitionTime") if same_status and current else now(),
        }
        meta = pod["metadata"]
        self.limiter.wait(self._stop)
        try:
            self.kube.patch(
                core("pods", meta["namespace"], meta["name"], "status"),
                {"status": {"conditions": [condition]}},
                STRATEGIC_MERGE_PATCH,
            )
        except ApiException as exc:
            if exc.status != 404:
                raise
            return
        self.marked_unschedulable.append(time.monotonic())
