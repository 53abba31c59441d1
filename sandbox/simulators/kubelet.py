"""A kubelet for every EC2 instance of the cluster: registers nodes, runs pods, goes away with the instance.

Two loops share one registry of the nodes this kubelet owns:

* :class:`NodeLifecycle` polls EC2 (the moto endpoint) for instances tagged
  ``kubernetes.io/cluster/<cluster>=owned`` or ``eks:eks-cluster-name=<cluster>``. ``boot_delay``
  seconds after an instance is first seen running it registers a Node as a real node's bootstrap and
  kubelet do, from the instance alone, never from its NodeClaim: named after its private DNS name,
  providerID ``aws:///<zone>/<instance-id>``, the labels the kubelet and the cloud provider set
  (hostname, OS, arch, Windows build; instance type, zone, region), capacity/allocatable (below), and
  the labels and taints its **user data** gives the kubelet (``sandbox.aws.eks_amis.read_user_data``:
  ``--node-labels``, ``--register-with-taints``, Bottlerocket's ``node-labels``/``node-taints``), so a
  label, taint or ``karpenter.sh/unregistered`` taint the product leaves out of the user data is not
  there, and the NodeClaim's own labels and taints reach the Node only through the product's
  registration. An instance whose user data joins no cluster or another one, or whose kubelet would
  refuse its flags (a restricted ``--node-labels`` key, a malformed taint), never registers. It marks
  the Node Ready (removing the not-ready taint). When the instance stops or terminates, the node
  goes NotReady, then is deleted on the next poll (what the cloud node-lifecycle controller does).
  A node deleted while its instance still runs is not registered again: the sandbox's instances
  never reboot, and Karpenter-style termination deletes the node before the instance.
* The agents an operator runs for its NodePools' ``startupTaints`` (a CNI, a storage driver) lift
  them ``init_delay`` after registration, once: the sandbox's stand-in knows them from the NodeClaim
  named in the instance's ``karpenter.sh/nodeclaim`` tag, as the operator configured both alike.
* :class:`PodRunner` runs the pods bound to those nodes (phase Running, Initialized/Ready/
  ContainersReady conditions, podIP, startTime, container statuses) and confirms graceful deletion
  (a pod with a deletionTimestamp is deleted with grace 0, as the kubelet does once its containers stop).

Capacity and allocatable follow the EKS AMI's bootstrap defaults, which Karpenter also assumes, from
what the instance itself is (never from its NodeClaim, so a wrong computation in the product shows):

* cpu = vCPUs; memory = instance MiB minus 7.5 % (the VM overhead Karpenter subtracts);
  pods = the bootstrap's ``--max-pods`` in the instance's user data, else ENIs * (IPv4 per ENI - 1) + 2;
  ephemeral-storage = the size of the volume the kubelet lives on (``sandbox.aws.eks_amis``: the root
  volume, Bottlerocket's data volume), or, when the user data builds the instance-store RAID0 array,
  the type's instance store (decimal GB);
  nvidia.com/gpu and aws.amazon.com/neuron from the GPU/Neuron counts; on a Windows node the VPC
  resource controller's vpc.amazonaws.com/PrivateIPv4Address (IPv4 per interface - 1).
* a node of a Windows AMI is ``kubernetes.io/os=windows`` with its ``node.kubernetes.io/windows-build``.
* allocatable = capacity - kube-reserved - eviction threshold, with kube-reserved
  cpu = 6 % of the first core + 1 % of the second + 0.5 % of cores 3-4 + 0.25 % of the rest,
  memory = 11 Mi * pods + 255 Mi, ephemeral-storage = 1 Gi; eviction: memory 100 Mi,
  ephemeral-storage 10 %.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import math
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from kubernetes.client.exceptions import ApiException

from sandbox.aws import eks_amis
from sandbox.aws.front import EC2_CHANGES
from sandbox.simulators.kube import MERGE_PATCH, STRATEGIC_MERGE_PATCH, Kube, core, group, record_event
from sandbox.simulators.loop import ReconcileLoop
from sandbox.simulators.recorder import RateLimiter
from sandbox.simulators.scheduler import now

log = logging.getLogger("sandbox.simulators")

NOT_READY_TAINT = "node.kubernetes.io/not-ready"
UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"
KUBELET_VERSION = "v1.31.0-eks-sandbox"
EPHEMERAL_STORAGE_GI = 20
NOT_TERMINATED_GONE = ("stopping", "stopped", "shutting-down")
GONE_STATES = (*NOT_TERMINATED_GONE, "terminated")
TRANSITIONAL_STATES = ("pending",)  # running soon: looked at again at the busy rate
EVENT_QPS = 50.0  # the kubelet's --event-qps default
EVENT_BURST = 100  # --event-burst
EVENTS_QUEUED = 1000  # client-go's broadcaster queue (maxQueuedEvents)


# --- the node a given instance type makes ------------------------------------------------------


def kube_reserved_millicores(vcpus: int) -> int:
    millicores = 0.0
    for core_index in range(vcpus):
        if core_index == 0:
            millicores += 1000 * 0.06
        elif core_index == 1:
            millicores += 1000 * 0.01
        elif core_index < 4:
            millicores += 1000 * 0.005
        else:
            millicores += 1000 * 0.0025
    return math.ceil(millicores)


def max_pods(info: dict[str, Any]) -> int:
    network = info.get("NetworkInfo") or {}
    enis = int(network.get("MaximumNetworkInterfaces") or 1)
    ips = int(network.get("Ipv4AddressesPerInterface") or 2)
    return enis * (ips - 1) + 2


@dataclass(frozen=True)
class NodeFacts:
    """What the instance is, beyond its type: its OS and the storage and pods its bootstrap gives it."""

    os: str = "linux"
    windows_build: str = ""
    storage_bytes: int = EPHEMERAL_STORAGE_GI * 1024**3
    max_pods: int | None = None


def node_resources(
    info: dict[str, Any], facts: NodeFacts | None = None
) -> tuple[dict[str, str], dict[str, str]]:
    """(capacity, allocatable) for an EC2 ``InstanceTypeInfo``, per the module docstring."""
    facts = facts or NodeFacts()
    vcpus = int(info["VCpuInfo"]["DefaultVCpus"])
    memory_mi = int(info["MemoryInfo"]["SizeInMiB"])
    memory_mi -= math.ceil(memory_mi * 0.075)
    pods = facts.max_pods if facts.max_pods is not None else max_pods(info)
    storage_ki = facts.storage_bytes // 1024
    capacity = {
        "cpu": str(vcpus),
        "memory": f"{memory_mi * 1024}Ki",
        "pods": str(pods),
        "ephemeral-storage": f"{storage_ki}Ki",
    }
    gpus = sum(g.get("Count", 0) for g in (info.get("GpuInfo") or {}).get("Gpus", []))
    if gpus:
        capacity["nvidia.com/gpu"] = str(gpus)
    neurons = sum(d.get("Count", 0) for d in (info.get("NeuronInfo") or {}).get("NeuronDevices", []))
    if neurons:
        capacity["aws.amazon.com/neuron"] = str(neurons)
    ips = int((info.get("NetworkInfo") or {}).get("Ipv4AddressesPerInterface") or 0)
    if facts.os == "windows" and ips > 1:
        capacity["vpc.amazonaws.com/PrivateIPv4Address"] = str(ips - 1)
    allocatable = dict(capacity)
    allocatable["cpu"] = f"{vcpus * 1000 - kube_reserved_millicores(vcpus)}m"
    allocatable["memory"] = f"{(memory_mi - (11 * pods + 255) - 100) * 1024}Ki"
    allocatable["ephemeral-storage"] = f"{storage_ki - 1024 * 1024 - storage_ki // 10}Ki"
    return capacity, allocatable


def architecture(info: dict[str, Any]) -> str:
    """The ``kubernetes.io/arch`` of an instance type (arm64 or amd64)."""
    architectures = (info.get("ProcessorInfo") or {}).get("SupportedArchitectures") or ["x86_64"]
    return "arm64" if "arm64" in architectures else "amd64"


def _is_not_ready_taint(taint: dict[str, Any]) -> bool:
    return taint.get("key") in (NOT_READY_TAINT, UNREACHABLE_TAINT)


def _condition(kind: str, status: str, reason: str, message: str) -> dict[str, Any]:
    stamp = now()
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastHeartbeatTime": stamp,
        "lastTransitionTime": stamp,
    }


def node_conditions(ready: bool) -> list[dict[str, Any]]:
    pressure = [
        _condition(
            "MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"
        ),
        _condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        _condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ]
    if ready:
        return [*pressure, _condition("Ready", "True", "KubeletReady", "kubelet is posting ready status")]
    return [
        _condition("Ready", "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status."),
    ]


@dataclass
class OwnedNode:
    instance_id: str
    node_name: str
    private_ip: str
    registered_at: float
    startup_taints: list[dict[str, Any]] = field(default_factory=list)
    initialized: bool = False
    not_ready_since: float | None = None


class Registry:
    """Nodes this kubelet registered, by instance id; shared by the two loops."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.nodes: dict[str, OwnedNode] = {}
        self.done: set[str] = set()  # instances whose node was registered and removed (never again)
        # Fault injection: instances that boot but never join (bad user data, no access entry); the
        # next ``fail_next_registrations`` instances seen running join this set.
        self.never_register: set[str] = set()
        self.fail_next_registrations = 0

    def by_node_name(self) -> dict[str, OwnedNode]:
        with self.lock:
            return {n.node_name: n for n in self.nodes.values()}


class NodeLifecycle(ReconcileLoop):
    """EC2 instance → Node. Woken by every mutating EC2 call (``sandbox.aws.front.EC2_CHANGES``): it
    looks every ``resync`` seconds while something is under way (an instance booting or stopping, a
    node initializing or being retired) and otherwise every ``idle_resync`` seconds, for what changes
    on EC2's own clock inside a read (a capacity block's end)."""

    name = "kubelet-nodes"

    def __init__(
        self,
        kube: Kube,
        ec2: Any,
        cluster_name: str,
        region: str,
        registry: Registry,
        *,
        boot_delay: float = 1.0,
        init_delay: float = 0.5,
        resync: float = 0.2,
        idle_resync: float = 2.0,
    ) -> None:
        super().__init__(kube, resync)
        self.idle_resync = idle_resync
        self._under_way = True
        self.ec2 = ec2
        self.cluster_name = cluster_name
        self.region = region
        self.registry = registry
        self.boot_delay = boot_delay
        self.init_delay = init_delay
        self._first_running: dict[str, float] = {}
        self._types: dict[str, dict[str, Any]] = {}
        self._images: dict[str, dict[str, Any]] = {}
        self._boots: dict[str, eks_amis.Bootstrap] = {}

    def _instances(self) -> dict[str, dict[str, Any]]:
        """The cluster's instances not yet terminated: tagged ``kubernetes.io/cluster/<name>=owned`` or
        ``eks:eks-cluster-name=<name>``. One DescribeInstances a poll (a ``tag-key`` filter's values
        are ORed; the tag values are then checked here), not one per tag: this loop polls every
        ``resync`` seconds, and each DescribeInstances costs the emulated EC2 its serialisation.
        Terminated instances stay visible for an hour and were half of what it serialised; a node's
        instance that is no longer listed is gone (``reconcile``)."""
        cluster_tag = f"kubernetes.io/cluster/{self.cluster_name}"
        wanted = {cluster_tag: "owned", "eks:eks-cluster-name": self.cluster_name}
        found: dict[str, dict[str, Any]] = {}
        filters = [
            {"Name": "tag-key", "Values": list(wanted)},
            {
                "Name": "instance-state-name",
                "Values": [*TRANSITIONAL_STATES, "running", *NOT_TERMINATED_GONE],
            },
        ]
        for page in self.ec2.get_paginator("describe_instances").paginate(Filters=filters):
            for reservation in page["Reservations"]:
                for instance in reservation["Instances"]:
                    tags = {t.get("Key"): t.get("Value") for t in instance.get("Tags") or []}
                    if any(tags.get(key) == value for key, value in wanted.items()):
                        found[instance["InstanceId"]] = instance
        return found

    def _image(self, instance: dict[str, Any]) -> dict[str, Any]:
        image_id = instance.get("ImageId") or ""
        if image_id not in self._images:
            found = self.ec2.describe_images(ImageIds=[image_id])["Images"] if image_id else []
            self._images[image_id] = found[0] if found else {}
        return self._images[image_id]

    def _family(self, instance: dict[str, Any]) -> str | None:
        image = self._image(instance)
        return eks_amis.family_of(image.get("Name") or "", image.get("Platform"))

    def _bootstrap(self, instance: dict[str, Any]) -> eks_amis.Bootstrap:
        """What the instance's bootstrap reads in its user data (read once: user data does not change
        while an instance runs)."""
        instance_id = instance["InstanceId"]
        if instance_id not in self._boots:
            user_data = (
                self.ec2.describe_instance_attribute(InstanceId=instance_id, Attribute="userData").get(
                    "UserData"
                )
                or {}
            )
            self._boots[instance_id] = eks_amis.read_user_data(
                self._family(instance), str(user_data.get("Value") or "")
            )
        return self._boots[instance_id]

    def _facts(self, instance: dict[str, Any], boot: eks_amis.Bootstrap) -> NodeFacts:
        """The instance's OS (its AMI), its kubelet's storage (its volumes, or the instance-store
        array its user data builds) and the max pods its user data gives the kubelet."""
        image = self._image(instance)
        family = self._family(instance)
        store = (self._type_info(instance["InstanceType"]).get("InstanceStorageInfo") or {}).get(
            "TotalSizeInGB"
        )
        if boot.raid0 and store:
            storage = int(store) * 1000**3
        else:
            device = eks_amis.kubelet_device(family, instance.get("RootDeviceName") or "")
            volume = next(
                (
                    (m.get("Ebs") or {}).get("VolumeId")
                    for m in instance.get("BlockDeviceMappings") or []
                    if m.get("DeviceName") == device
                ),
                None,
            )
            sizes = self.ec2.describe_volumes(VolumeIds=[volume])["Volumes"] if volume else []
            storage = int(sizes[0]["Size"]) * 1024**3 if sizes else EPHEMERAL_STORAGE_GI * 1024**3
        windows = family == "windows"
        return NodeFacts(
            os="windows" if windows else "linux",
            windows_build=eks_amis.windows_build(image.get("Name") or "") if windows else "",
            storage_bytes=storage,
            max_pods=boot.max_pods,
        )

    def _type_info(self, instance_type: str) -> dict[str, Any]:
        if instance_type not in self._types:
            self._types[instance_type] = self.ec2.describe_instance_types(InstanceTypes=[instance_type])[
                "InstanceTypes"
            ][0]
        return self._types[instance_type]

    def start(self) -> None:
        EC2_CHANGES.subscribe(self.wake)
        super().start()

    def signal_stop(self) -> None:
        EC2_CHANGES.unsubscribe(self.wake)
        super().signal_stop()

    def next_resync(self) -> float:
        """``resync`` while something is under way, but never less than the last look took: each
        look is a DescribeInstances of every instance of the cluster (moto serialises 500 of them in
        about 1.5 s on a loaded machine), and looking again the moment one ends kept the 500-node
        storm's sandbox busy serialising them."""
        if not self._under_way:
            return self.idle_resync
        return max(self.resync, self.last_pass_seconds)

    def reconcile(self) -> None:
        clock = time.monotonic()
        under_way = False
        instances = self._instances()
        with self.registry.lock:
            vanished = [
                owned for instance_id, owned in self.registry.nodes.items() if instance_id not in instances
            ]
        for gone in vanished:  # terminated (no longer listed): its node goes, as for a listed gone one
            under_way = True
            self._retire(gone, clock)
        for instance_id, instance in instances.items():
            state = instance["State"]["Name"]
            owned = self.registry.nodes.get(instance_id)
            if state == "running":
                if owned is None and instance_id not in self.registry.done:
                    if self._silent(instance_id) or not self._joins(instance):
                        continue
                    under_way = True
                    first = self._first_running.setdefault(instance_id, clock)
                    if clock - first >= self.boot_delay:
                        self._register(instance)
                elif owned is not None and not owned.initialized:
                    under_way = True
                    if clock - owned.registered_at >= self.init_delay:
                        self._initialize(owned)
            elif state in GONE_STATES and owned is not None:
                under_way = True
                self._retire(owned, clock)
            elif state in TRANSITIONAL_STATES:
                under_way = True
        self._under_way = under_way

    def _silent(self, instance_id: str) -> bool:
        """Whether this instance's kubelet never joins the cluster (an injected fault)."""
        registry = self.registry
        with registry.lock:
            fresh = instance_id not in registry.never_register and instance_id not in self._first_running
            if fresh and registry.fail_next_registrations > 0:
                registry.fail_next_registrations -= 1
                registry.never_register.add(instance_id)
            return instance_id in registry.never_register

    def _joins(self, instance: dict[str, Any]) -> bool:
        """Whether the instance's bootstrap joins this cluster with a kubelet that starts; one that
        does not never will (user data does not change while it runs)."""
        boot = self._bootstrap(instance)
        if boot.refused:
            why = f"its kubelet does not start: {boot.refused}"
        elif boot.cluster != self.cluster_name:
            why = (
                f"its user data joins cluster {boot.cluster!r}"
                if boot.cluster
                else "its user data joins no cluster"
            )
        else:
            return True
        log.warning("instance %s never registers a Node: %s", instance["InstanceId"], why)
        with self.registry.lock:
            self.registry.never_register.add(instance["InstanceId"])
        return False

    # registration

    def _startup_taints(self, tags: dict[str, str]) -> list[dict[str, Any]]:
        """The taints the operator's startup agents lift: its NodePool's startupTaints, which the
        stand-in reads from the NodeClaim named in the instance's tag (never the kubelet's input)."""
        name = tags.get("karpenter.sh/nodeclaim")
        if not name:
            return []
        try:
            claim = self.kube.get_or_none(group("karpenter.sh/v1", "nodeclaims", name=name)) or {}
        except ApiException:
            return []  # the CRD may not be installed: no agent waits for a NodeClaim's taints
        return list((claim.get("spec") or {}).get("startupTaints") or [])

    def _register(self, instance: dict[str, Any]) -> None:
        tags = {t["Key"]: t["Value"] for t in instance.get("Tags") or []}
        info = self._type_info(instance["InstanceType"])
        zone = instance["Placement"]["AvailabilityZone"]
        node_name = instance.get("PrivateDnsName") or instance["InstanceId"]
        boot = self._bootstrap(instance)
        facts = self._facts(instance, boot)
        # The kubelet's own labels; its --node-labels override them (the kubelet warns and uses them);
        # then what the cloud provider sets when it initializes the node.
        labels = {
            "kubernetes.io/hostname": node_name,
            "kubernetes.io/os": facts.os,
            "kubernetes.io/arch": architecture(info),
        }
        if facts.windows_build:
            labels["node.kubernetes.io/windows-build"] = facts.windows_build
        labels.update(boot.labels)
        labels.update(
            {
                "node.kubernetes.io/instance-type": instance["InstanceType"],
                "topology.kubernetes.io/zone": zone,
                "topology.kubernetes.io/region": self.region,
            }
        )
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": node_name, "labels": labels},
            "spec": {
                "providerID": f"aws:///{zone}/{instance['InstanceId']}",
                "taints": [dict(t) for t in boot.taints],
            },
            "status": self._status(instance, labels, facts, ready=False),
        }
        try:
            self.kube.create(core("nodes"), body)
        except ApiException as exc:
            if exc.status != 409:
                raise
        status = self._status(instance, labels, facts, ready=True)
        self.kube.patch(
            core("nodes", name=node_name, sub="status"), {"status": status}, STRATEGIC_MERGE_PATCH
        )
        node_ref = {"kind": "Node", "apiVersion": "v1", "metadata": {"name": node_name, "uid": node_name}}
        record_event(
            self.kube, node_ref, "Starting", "Starting kubelet.", component="kubelet", host=node_name
        )
        record_event(
            self.kube,
            node_ref,
            "NodeReady",
            f"Node {node_name} status is now: NodeReady",
            component="kubelet",
            host=node_name,
        )
        # Owned only once Ready: a failure above is retried from the start on the next poll (create → 409).
        with self.registry.lock:
            self.registry.nodes[instance["InstanceId"]] = OwnedNode(
                instance_id=instance["InstanceId"],
                node_name=node_name,
                private_ip=instance.get("PrivateIpAddress", ""),
                registered_at=time.monotonic(),
                startup_taints=self._startup_taints(tags),
            )
        self._remove_taints(node_name, _is_not_ready_taint)

    def _status(
        self, instance: dict[str, Any], labels: dict[str, str], facts: NodeFacts, ready: bool
    ) -> dict[str, Any]:
        capacity, allocatable = node_resources(self._type_info(instance["InstanceType"]), facts)
        windows = facts.os == "windows"
        private_ip = instance.get("PrivateIpAddress", "")
        node_name = labels["kubernetes.io/hostname"]
        return {
            "capacity": capacity,
            "allocatable": allocatable,
            "conditions": node_conditions(ready),
            "addresses": [
                {"type": "InternalIP", "address": private_ip},
                {"type": "InternalDNS", "address": node_name},
                {"type": "Hostname", "address": node_name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "architecture": labels["kubernetes.io/arch"],
                "bootID": instance["InstanceId"],
                "containerRuntimeVersion": "containerd://1.7.22",
                "kernelVersion": f"{facts.windows_build}.0" if windows else "6.1.112-sandbox",
                "kubeProxyVersion": KUBELET_VERSION,
                "kubeletVersion": KUBELET_VERSION,
                "machineID": instance["InstanceId"],
                "operatingSystem": facts.os,
                "osImage": "Windows Server Datacenter (sandbox)"
                if windows
                else "Amazon Linux 2023 (sandbox)",
                "systemUUID": instance["InstanceId"],
            },
        }

    def _remove_taints(self, node_name: str, unwanted: Any) -> bool:
        """Drop matching taints with an optimistic-concurrency write (others may be tainting the node)."""
        node = self.kube.get_or_none(core("nodes", name=node_name))
        if node is None:
            return True
        taints = (node.get("spec") or {}).get("taints") or []
        kept = [t for t in taints if not unwanted(t)]
        if len(kept) == len(taints):
            return True
        patch = {
            "metadata": {"resourceVersion": node["metadata"]["resourceVersion"]},
            "spec": {"taints": kept},
        }
        try:
            self.kube.patch(core("nodes", name=node_name), patch, MERGE_PATCH)
        except ApiException as exc:
            if exc.status == 409:
                return False  # try again next pass
            raise
        return True

    def _initialize(self, owned: OwnedNode) -> None:
        """The startup agents lift their taints, once (a taint put back later stays, as it does when
        an agent only lifts it as it starts); a not-ready taint a conflict left behind goes too."""
        startup = {(t.get("key"), t.get("value"), t.get("effect")) for t in owned.startup_taints}
        if self._remove_taints(
            owned.node_name,
            lambda t: _is_not_ready_taint(t) or (t.get("key"), t.get("value"), t.get("effect")) in startup,
        ):
            owned.initialized = True

    # retirement

    def _retire(self, owned: OwnedNode, clock: float) -> None:
        if owned.not_ready_since is None:
            patch = {"status": {"conditions": node_conditions(ready=False)}}
            try:
                self.kube.patch(
                    core("nodes", name=owned.node_name, sub="status"), patch, STRATEGIC_MERGE_PATCH
                )
            except ApiException as exc:
                if exc.status != 404:
                    raise
            owned.not_ready_since = clock
            return
        self.kube.delete_ignoring_missing(core("nodes", name=owned.node_name))
        with self.registry.lock:
            self.registry.nodes.pop(owned.instance_id, None)
            self.registry.done.add(owned.instance_id)


class PodRunner(ReconcileLoop):
    """Runs the pods bound to this kubelet's nodes and confirms their graceful deletion.

    It reads the pods from its informer (``informed_paths``), as a kubelet reads its pods from a
    watch, rather than listing every pod of the cluster on each change: with 2,500 pods those lists,
    one per pod event, were the sandbox process's largest CPU cost. The cache can lag the kubelet's
    own writes, so a pod it started is remembered (by uid) and not started again, as the kubelet's
    pod workers know what they run. A started pod's events (Pulled, Created, Started) go through a
    recorder of its own, as the kubelet's do: queued, written by another thread, never waited for
    by the next pod's start (three synchronous writes a pod held the 500-node setup's pods Pending
    on bound nodes: 1,724 of 2,500 running with 2,300 bound when its 900 s ran out)."""

    name = "kubelet-pods"
    watch_paths = (core("pods"),)
    informed_paths = watch_paths

    def __init__(self, kube: Kube, registry: Registry, resync: float = 1.0) -> None:
        super().__init__(kube, resync)
        self.registry = registry
        self._ips = itertools.count(10)
        self.started = 0
        self._started_uids: set[str] = set()
        # The kubelet's event recorder: a pod's events are queued and written by the broadcaster,
        # never waited for by the pod's start (client-go's record.EventBroadcaster: 1000 queued,
        # the rest dropped), at the kubelet's --event-qps 50 / --event-burst 100.
        self._events: queue.Queue[tuple[dict[str, Any], str, str, str]] = queue.Queue(EVENTS_QUEUED)
        self._event_limit = RateLimiter(EVENT_QPS, EVENT_BURST)

    def start(self) -> None:
        super().start()
        writer = threading.Thread(target=self._write_events, name=f"sandbox-{self.name}-events", daemon=True)
        writer.start()
        self._threads.append(writer)

    def _write_events(self) -> None:
        while not self._stop.is_set():
            try:
                involved, reason, message, host = self._events.get(timeout=0.5)
            except queue.Empty:
                continue
            self._event_limit.wait(self._stop)
            if not self._stop.is_set():
                record_event(self.kube, involved, reason, message, component="kubelet", host=host)

    def _pod_ip(self) -> str:
        n = next(self._ips)
        return f"100.64.{(n // 250) % 256}.{n % 250 + 1}"

    def reconcile(self) -> None:
        pods = self.cached(core("pods"))
        if pods is None:  # the informer's first list not in yet
            pods, _ = self.kube.list(core("pods"))
        owned = self.registry.by_node_name()
        self._started_uids &= {pod["metadata"].get("uid", "") for pod in pods}  # the gone are forgotten
        for pod in pods:
            node = owned.get((pod.get("spec") or {}).get("nodeName") or "")
            if node is None:
                continue
            meta = pod["metadata"]
            if meta.get("deletionTimestamp"):
                self.kube.delete_ignoring_missing(
                    core("pods", meta["namespace"], meta["name"]), grace_period_seconds=0, uid=meta.get("uid")
                )
            elif (pod.get("status") or {}).get("phase", "Pending") == "Pending" and (
                meta.get("uid") not in self._started_uids
            ):
                self._start(pod, node)

    def _start(self, pod: dict[str, Any], node: OwnedNode) -> None:
        meta = pod["metadata"]
        stamp = now()
        ip = self._pod_ip()
        ready = [
            {"type": kind, "status": "True", "lastProbeTime": None, "lastTransitionTime": stamp}
            for kind in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady")
        ]
        statuses = [
            {
                "name": c["name"],
                "image": c.get("image", ""),
                "imageID": f"sandbox://{c.get('image', '')}",
                "containerID": f"containerd://{meta.get('uid', '')}-{c['name']}",
                "ready": True,
                "started": True,
                "restartCount": 0,
                "state": {"running": {"startedAt": stamp}},
            }
            for c in (pod.get("spec") or {}).get("containers") or []
        ]
        status = {
            "phase": "Running",
            "hostIP": node.private_ip,
            "hostIPs": [{"ip": node.private_ip}],
            "podIP": ip,
            "podIPs": [{"ip": ip}],
            "startTime": stamp,
            "conditions": ready,
            "containerStatuses": statuses,
        }
        # The kubelet's status manager sends a two-way strategic merge patch, which names the order
        # of every condition; PodScheduled (the scheduler's) stays last, as on a real node.
        order = [{"type": c["type"]} for c in ready] + [{"type": "PodScheduled"}]
        patch = {"status": {**status, "$setElementOrder/conditions": order}}
        try:
            self.kube.patch(
                core("pods", meta["namespace"], meta["name"], "status"),
                patch,
                STRATEGIC_MERGE_PATCH,
            )
            self.started += 1
            self._started_uids.add(meta.get("uid", ""))
        except ApiException as exc:
            if exc.status != 404:
                raise
            return
        involved = {"kind": "Pod", "apiVersion": "v1", **pod}
        for container in (pod.get("spec") or {}).get("containers") or []:
            name, image = container["name"], container.get("image", "")
            for reason, message in (
                ("Pulled", f'Container image "{image}" already present on machine'),
                ("Created", f"Created container: {name}"),
                ("Started", f"Started container {name}"),
            ):
                with contextlib.suppress(queue.Full):  # dropped, as the broadcaster drops
                    self._events.put_nowait((involved, reason, message, node.node_name))


class Kubelet:
    """Both kubelet loops for one cluster, started and stopped together."""

    def __init__(
        self,
        kube: Kube,
        ec2: Any,
        cluster_name: str,
        region: str,
        *,
        boot_delay: float = 1.0,
        init_delay: float = 0.5,
    ) -> None:
        self.registry = Registry()
        self.nodes = NodeLifecycle(
            kube, ec2, cluster_name, region, self.registry, boot_delay=boot_delay, init_delay=init_delay
        )
        self.pods = PodRunner(kube, self.registry)

    @property
    def loops(self) -> list[ReconcileLoop]:
        return [self.nodes, self.pods]
