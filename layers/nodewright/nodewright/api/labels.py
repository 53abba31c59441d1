"""Well-known label, taint and annotation names shared by the API, the scheduler and the flows."""

from __future__ import annotations

# Events: the component Nodewright reports its own as (source.component, reportingComponent), and
# the reason a scheduler (kube-scheduler, and Nodewright as Karpenter does) gives a pod it cannot place.
EVENT_COMPONENT = "nodewright"
FAILED_SCHEDULING = "FailedScheduling"

# karpenter.sh
NODEPOOL = "karpenter.sh/nodepool"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
NODE_REGISTERED = "karpenter.sh/registered"
NODE_INITIALIZED = "karpenter.sh/initialized"
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
NODECLAIM_MIN_VALUES_RELAXED = "karpenter.sh/nodeclaim-min-values-relaxed"
NODECLAIM_TAG = "karpenter.sh/nodeclaim"
TERMINATION_FINALIZER = "karpenter.sh/termination"
DISRUPTED_TAINT_KEY = "karpenter.sh/disrupted"
UNREGISTERED_TAINT_KEY = "karpenter.sh/unregistered"
# On a Node (set by its kubelet from user data): registration leaves the Node's taints as they are.
DO_NOT_SYNC_TAINTS = "karpenter.sh/do-not-sync-taints"

CAPACITY_TYPE_SPOT = "spot"
CAPACITY_TYPE_ON_DEMAND = "on-demand"
CAPACITY_TYPE_RESERVED = "reserved"

# Annotation domains Karpenter and Nodewright keep their own bookkeeping in (hashes, disruption
# state): a NodeClaim's annotations in them are not synced onto its Node.
BOOKKEEPING_ANNOTATION_DOMAINS: frozenset[str] = frozenset(
    {
        "karpenter.sh",
        "karpenter.k8s.aws",
        "compatibility.karpenter.sh",
        "compatibility.karpenter.k8s.aws",
        "nodewright.io",
        "compatibility.nodewright.io",
    }
)

# On a pod as a simulation plans it once evicted (``state.pods.as_pending``; never written to the API
# server): the node it leaves. What the plan places is its replacement, a new pod whose generic
# ephemeral volumes get new claims, so its current claims' volumes do not bind it.
DISPLACED_FROM = "nodewright.io/displaced-from"


def ephemeral_claim_name(pod_name: str, volume_name: str) -> str:
    """The PersistentVolumeClaim of a pod's generic ephemeral volume, as the ephemeral-volume
    controller names it (``ephemeral.VolumeClaimName``): ``<pod name>-<volume name>``."""
    return f"{pod_name}-{volume_name}"


# karpenter.k8s.aws
EC2NODECLASS = "karpenter.k8s.aws/ec2nodeclass"
INSTANCE_CATEGORY = "karpenter.k8s.aws/instance-category"
INSTANCE_FAMILY = "karpenter.k8s.aws/instance-family"
INSTANCE_GENERATION = "karpenter.k8s.aws/instance-generation"
INSTANCE_SIZE = "karpenter.k8s.aws/instance-size"
INSTANCE_CPU = "karpenter.k8s.aws/instance-cpu"
INSTANCE_CPU_MANUFACTURER = "karpenter.k8s.aws/instance-cpu-manufacturer"
INSTANCE_MEMORY = "karpenter.k8s.aws/instance-memory"
INSTANCE_HYPERVISOR = "karpenter.k8s.aws/instance-hypervisor"
INSTANCE_ENCRYPTION_IN_TRANSIT = "karpenter.k8s.aws/instance-encryption-in-transit-supported"
INSTANCE_LOCAL_NVME = "karpenter.k8s.aws/instance-local-nvme"
INSTANCE_NETWORK_BANDWIDTH = "karpenter.k8s.aws/instance-network-bandwidth"
INSTANCE_EBS_BANDWIDTH = "karpenter.k8s.aws/instance-ebs-bandwidth"
INSTANCE_GPU_NAME = "karpenter.k8s.aws/instance-gpu-name"
INSTANCE_GPU_MANUFACTURER = "karpenter.k8s.aws/instance-gpu-manufacturer"
INSTANCE_GPU_COUNT = "karpenter.k8s.aws/instance-gpu-count"
INSTANCE_GPU_MEMORY = "karpenter.k8s.aws/instance-gpu-memory"
INSTANCE_ACCELERATOR_NAME = "karpenter.k8s.aws/instance-accelerator-name"
INSTANCE_ACCELERATOR_MANUFACTURER = "karpenter.k8s.aws/instance-accelerator-manufacturer"
INSTANCE_ACCELERATOR_COUNT = "karpenter.k8s.aws/instance-accelerator-count"
INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ = "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz"
INSTANCE_CAPABILITY_FLEX = "karpenter.k8s.aws/instance-capability-flex"
INSTANCE_NITRO_ENCLAVES_SUPPORTED = "karpenter.k8s.aws/instance-nitro-enclaves-supported"
INSTANCE_TENANCY = "karpenter.k8s.aws/instance-tenancy"
CAPACITY_RESERVATION_ID = "karpenter.k8s.aws/capacity-reservation-id"
CAPACITY_RESERVATION_TYPE = "karpenter.k8s.aws/capacity-reservation-type"
CAPACITY_RESERVATION_INTERRUPTIBLE = "karpenter.k8s.aws/capacity-reservation-interruptible"
TOPOLOGY_ZONE_ID = "topology.k8s.aws/zone-id"
TENANCY_DEFAULT = "default"
TENANCY_DEDICATED = "dedicated"

# kubernetes.io
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
ARCH = "kubernetes.io/arch"
OS = "kubernetes.io/os"
HOSTNAME = "kubernetes.io/hostname"
WINDOWS_BUILD = "node.kubernetes.io/windows-build"

# Labels a NodePool may require and every launched node carries (or can carry).
WELL_KNOWN_LABELS: frozenset[str] = frozenset(
    {
        NODEPOOL,
        CAPACITY_TYPE,
        ZONE,
        REGION,
        INSTANCE_TYPE,
        ARCH,
        OS,
        WINDOWS_BUILD,
        INSTANCE_CATEGORY,
        INSTANCE_FAMILY,
        INSTANCE_GENERATION,
        INSTANCE_SIZE,
        INSTANCE_CPU,
        INSTANCE_CPU_MANUFACTURER,
        INSTANCE_MEMORY,
        INSTANCE_HYPERVISOR,
        INSTANCE_ENCRYPTION_IN_TRANSIT,
        INSTANCE_LOCAL_NVME,
        INSTANCE_NETWORK_BANDWIDTH,
        INSTANCE_EBS_BANDWIDTH,
        INSTANCE_GPU_NAME,
        INSTANCE_GPU_MANUFACTURER,
        INSTANCE_GPU_COUNT,
        INSTANCE_GPU_MEMORY,
        INSTANCE_ACCELERATOR_NAME,
        INSTANCE_ACCELERATOR_MANUFACTURER,
        INSTANCE_ACCELERATOR_COUNT,
        INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ,
        INSTANCE_CAPABILITY_FLEX,
        INSTANCE_NITRO_ENCLAVES_SUPPORTED,
        INSTANCE_TENANCY,
        CAPACITY_RESERVATION_ID,
        CAPACITY_RESERVATION_TYPE,
        CAPACITY_RESERVATION_INTERRUPTIBLE,
        TOPOLOGY_ZONE_ID,
        EC2NODECLASS,
    }
)

# The karpenter.k8s.aws labels Karpenter v1.14's CRDs let a NodePool set or require (its CEL rule
# "label domain karpenter.k8s.aws is restricted" lists them); every other key of that domain is refused.
AWS_LABELS_ALLOWED_IN_NODEPOOLS: tuple[str, ...] = (
    INSTANCE_TENANCY,
    CAPACITY_RESERVATION_TYPE,
    CAPACITY_RESERVATION_ID,
    CAPACITY_RESERVATION_INTERRUPTIBLE,
    EC2NODECLASS,
    INSTANCE_ENCRYPTION_IN_TRANSIT,
    "karpenter.k8s.aws/nitro-sandbox",
    INSTANCE_CATEGORY,
    INSTANCE_HYPERVISOR,
    INSTANCE_FAMILY,
    INSTANCE_GENERATION,
    INSTANCE_LOCAL_NVME,
    INSTANCE_SIZE,
    INSTANCE_CPU,
    INSTANCE_CPU_MANUFACTURER,
    INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ,
    INSTANCE_MEMORY,
    INSTANCE_EBS_BANDWIDTH,
    INSTANCE_NETWORK_BANDWIDTH,
    INSTANCE_GPU_NAME,
    INSTANCE_GPU_MANUFACTURER,
    INSTANCE_GPU_COUNT,
    INSTANCE_GPU_MEMORY,
    INSTANCE_ACCELERATOR_NAME,
    INSTANCE_ACCELERATOR_MANUFACTURER,
    INSTANCE_ACCELERATOR_COUNT,
    INSTANCE_CAPABILITY_FLEX,
    "karpenter.k8s.aws/placement-group-id",
    "karpenter.k8s.aws/placement-group-partition",
)

# Label domains Karpenter reserves (v1.14): a NodePool may set or require only their well-known
# keys (``karpenter.sh/capacity-type``; the ``karpenter.k8s.aws`` keys above). Since Karpenter v1.9
# (kubernetes-sigs/karpenter#2586) the kubernetes.io and k8s.io domains are not restricted: a
# NodePool may label its nodes ``node-role.kubernetes.io/worker``. Such a label reaches the Node at
# registration (the NodeClaim's labels are synced onto it), not through the kubelet's
# --node-labels, which the NodeRestriction admission plugin limits (``cloud.userdata.kubelet_may_set``).
RESTRICTED_LABEL_DOMAINS: frozenset[str] = frozenset({"karpenter.sh", "karpenter.k8s.aws"})

# Renamed in v1 (v1alpha5/v1beta1 → v1).
LEGACY_PROVISIONER_NAME = "karpenter.sh/provisioner-name"
LEGACY_DO_NOT_EVICT = "karpenter.sh/do-not-evict"
LEGACY_DO_NOT_CONSOLIDATE = "karpenter.sh/do-not-consolidate"

# Old label/annotation names and their v1 replacements (used by conversion and by warnings on pods).
LEGACY_RENAMES: dict[str, str] = {
    LEGACY_PROVISIONER_NAME: NODEPOOL,
    LEGACY_DO_NOT_EVICT: DO_NOT_DISRUPT,
    LEGACY_DO_NOT_CONSOLIDATE: DO_NOT_DISRUPT,
}

# Labels that exist only on nodes (never on instance types): requiring them in a NodePool is refused.
RESTRICTED_LABELS: frozenset[str] = frozenset({HOSTNAME})

# Old or alias label keys Karpenter normalizes to the well-known ones wherever a requirement is
# made (Karpenter's NormalizedLabels, plus the EBS CSI driver's zone key the AWS provider adds).
DEPRECATED_LABEL_ALIASES: dict[str, str] = {
    "beta.kubernetes.io/instance-type": INSTANCE_TYPE,
    "beta.kubernetes.io/arch": ARCH,
    "beta.kubernetes.io/os": OS,
    "failure-domain.beta.kubernetes.io/zone": ZONE,
    "failure-domain.beta.kubernetes.io/region": REGION,
    "topology.ebs.csi.aws.com/zone": ZONE,
}


def normalized_label(key: str) -> str:
    """The well-known key for an alias (``beta.kubernetes.io/arch`` → ``kubernetes.io/arch``), else key."""
    return DEPRECATED_LABEL_ALIASES.get(key, key)


# API groups and kinds.
KARPENTER_GROUP = "karpenter.sh"
AWS_GROUP = "karpenter.k8s.aws"
EC2NODECLASS_KIND = "EC2NodeClass"

# EC2NodeClass: AMI families and the alias family names (alias: family@version).
AMI_FAMILIES: tuple[str, ...] = ("AL2", "AL2023", "Bottlerocket", "Custom")
ALIAS_FAMILIES: dict[str, str] = {"al2": "AL2", "al2023": "AL2023", "bottlerocket": "Bottlerocket"}
# The EKS-optimized Windows Server Core families (alias windows2019@latest, ...; only ``latest``), and
# the ``node.kubernetes.io/windows-build`` of each (Karpenter v1's Windows<year>Build).
WINDOWS_FAMILIES: tuple[str, ...] = ("Windows2019", "Windows2022", "Windows2025")
WINDOWS_ALIAS_FAMILIES: dict[str, str] = {family.lower(): family for family in WINDOWS_FAMILIES}
WINDOWS_BUILDS: dict[str, str] = {
    "Windows2019": "10.0.17763",
    "Windows2022": "10.0.20348",
    "Windows2025": "10.0.26100",
}

# Tags Nodewright sets itself on every instance: a user may not set them in EC2NodeClass.spec.tags.
RESERVED_TAG_KEYS: frozenset[str] = frozenset({NODEPOOL, NODECLAIM_TAG, EC2NODECLASS, "eks:eks-cluster-name"})
RESERVED_TAG_PREFIXES: tuple[str, ...] = ("kubernetes.io/cluster/",)


def label_domain(key: str) -> str:
    """The DNS prefix of a label key (``""`` when the key has none)."""
    return key.split("/", 1)[0] if "/" in key else ""


def is_restricted_label(key: str) -> bool:
    """True when a NodePool may not set or require ``key`` (Karpenter v1.14's CRD rules: the
    karpenter.sh domain but capacity-type and nodepool, kubernetes.io/hostname, the karpenter.k8s.aws
    domain but ``AWS_LABELS_ALLOWED_IN_NODEPOOLS``)."""
    if key in WELL_KNOWN_LABELS or key in DEPRECATED_LABEL_ALIASES or key in AWS_LABELS_ALLOWED_IN_NODEPOOLS:
        return False
    if key in RESTRICTED_LABELS:
        return True
    domain = label_domain(key)
    return any(domain == d or domain.endswith("." + d) for d in RESTRICTED_LABEL_DOMAINS)
