"""Requirements algebra, quantities, the instance type model and the Kubernetes JSON parsers."""

from __future__ import annotations

import pytest
from nodewright.api import labels as wk
from nodewright.scheduling import KubeletSettings, Offering, Requirement, Requirements, instance_type_from_ec2
from nodewright.scheduling.instancetypes import kube_reserved_cpu
from nodewright.scheduling.model import node_from_k8s, pod_from_k8s, pods_from_k8s
from nodewright.scheduling.resources import MIB, parse_resource, pod_requests

M5_LARGE = {
    "InstanceType": "m5.large",
    "VCpuInfo": {"DefaultVCpus": 2},
    "MemoryInfo": {"SizeInMiB": 8192},
    "ProcessorInfo": {"Manufacturer": "Intel", "SupportedArchitectures": ["x86_64"]},
    "Hypervisor": "nitro",
    "NetworkInfo": {
        "MaximumNetworkInterfaces": 3,
        "Ipv4AddressesPerInterface": 10,
        "EncryptionInTransitSupported": False,
        "NetworkCards": [{"BaselineBandwidthInGbps": 0.75}],
    },
    "EbsInfo": {"EbsOptimizedInfo": {"MaximumBandwidthInMbps": 4750}},
}
G4DN = {
    "InstanceType": "g4dn.xlarge",
    "VCpuInfo": {"DefaultVCpus": 4},
    "MemoryInfo": {"SizeInMiB": 16384},
    "ProcessorInfo": {"Manufacturer": "Intel", "SupportedArchitectures": ["x86_64"]},
    "NetworkInfo": {"MaximumNetworkInterfaces": 3, "Ipv4AddressesPerInterface": 10, "EfaSupported": False},
    "GpuInfo": {
        "Gpus": [{"Name": "T4", "Manufacturer": "NVIDIA", "Count": 1, "MemoryInfo": {"SizeInMiB": 16384}}]
    },
    "InstanceStorageInfo": {"TotalSizeInGB": 125, "NvmeSupport": "required"},
}


@pytest.mark.parametrize(
    ("requirement", "value", "expected"),
    [
        (Requirement.create("k", "In", ["a", "b"]), "a", True),
        (Requirement.create("k", "In", ["a", "b"]), "c", False),
        (Requirement.create("k", "NotIn", ["a"]), "a", False),
        (Requirement.create("k", "NotIn", ["a"]), "b", True),
        (Requirement.create("k", "Exists"), "anything", True),
        (Requirement.create("k", "DoesNotExist"), "anything", False),
        (Requirement.create("k", "Gt", ["2"]), "3", True),
        (Requirement.create("k", "Gt", ["2"]), "2", False),
        (Requirement.create("k", "Lt", ["8"]), "7", True),
        (Requirement.create("k", "Lt", ["8"]), "x", False),
    ],
)
def test_requirement_membership_follows_operator(
    requirement: Requirement, value: str, expected: bool
) -> None:
    assert requirement.has(value) is expected


@pytest.mark.parametrize(
    ("left", "right", "allowed", "refused"),
    [
        (("In", ["a", "b"]), ("In", ["b", "c"]), ["b"], ["a", "c"]),
        (("In", ["a", "b"]), ("NotIn", ["a"]), ["b"], ["a"]),
        (("NotIn", ["a"]), ("NotIn", ["b"]), ["c"], ["a", "b"]),
        (("Gt", ["2"]), ("Lt", ["5"]), ["3", "4"], ["2", "5"]),
        (("Exists", []), ("In", ["x"]), ["x"], ["y"]),
    ],
)
def test_intersection_keeps_only_values_both_allow(left, right, allowed, refused) -> None:
    both = Requirement.create("k", *left).intersect(Requirement.create("k", *right))
    assert all(both.has(v) for v in allowed)
    assert not any(both.has(v) for v in refused)


def test_intersection_of_disjoint_sets_is_empty_and_gt_lt_gap_is_empty() -> None:
    assert Requirement.create("k", "In", ["a"]).intersect(Requirement.create("k", "In", ["b"])).is_empty()
    assert Requirement.create("k", "Gt", ["3"]).intersect(Requirement.create("k", "Lt", ["4"])).is_empty()


def test_min_values_survive_intersection_and_serialise() -> None:
    merged = Requirement.create("k", "In", ["a", "b", "c"], 2).intersect(Requirement.create("k", "Exists"))
    assert merged.min_values == 2
    assert merged.to_k8s() == [{"key": "k", "operator": "In", "values": ["a", "b", "c"], "minValues": 2}]


def test_unknown_operator_and_bad_gt_value_are_reported() -> None:
    with pytest.raises(ValueError, match="unknown operator"):
        Requirement.create("k", "Like", ["a"])
    with pytest.raises(ValueError, match="one integer"):
        Requirement.create("k", "Gt", ["x"])


def test_a_new_nodeclaim_is_labelled_with_a_value_of_each_custom_requirement_as_karpenter_does() -> None:
    """Karpenter's ``Requirements.Labels()``: one allowed value per custom key (well-known and
    restricted keys come from the instance, not from here), so the node satisfies its NodePool. Since
    Karpenter v1.9 a kubernetes.io key is a custom key like any other."""
    found = Requirements.from_k8s(
        [
            {
                "key": "node.kubernetes.io/instance-type47",
                "operator": "In",
                "values": ["t3a.large", "t3.large"],
            },
            {"key": "team", "operator": "Exists"},
            {"key": "tier", "operator": "NotIn", "values": ["0", "1"]},
            {"key": "generation", "operator": "Gt", "values": ["5"]},
            {"key": "gone", "operator": "DoesNotExist"},
            {"key": wk.ZONE, "operator": "In", "values": ["us-west-2a", "us-west-2b"]},
            {"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["spot"]},
            {"key": "kubernetes.io/custom", "operator": "In", "values": ["x", "y"]},
        ]
    )
    labels = found.node_labels()
    assert labels == {
        "node.kubernetes.io/instance-type47": "t3.large",
        "team": "0",
        "tier": "2",
        "generation": "6",
        wk.CAPACITY_TYPE: "spot",  # single-valued: as labels() always did
        "kubernetes.io/custom": "x",
    }
    assert found.matches_labels({**labels, wk.ZONE: "us-west-2a"})
    assert Requirement.create("n", "Lt", ["0"]).any_value() == "-1"
    assert Requirement.create("n", "In", []).any_value() is None


@pytest.mark.parametrize(
    ("node", "pod", "conflict"),
    [
        ({"team": ("In", ["a"])}, {"team": ("In", ["a"])}, None),
        ({"team": ("In", ["a"])}, {"team": ("In", ["b"])}, "conflicts"),
        ({}, {"team": ("In", ["a"])}, "not defined"),
        ({}, {"team": ("NotIn", ["a"])}, None),
        ({}, {wk.ZONE: ("In", ["us-east-1a"])}, None),  # well-known labels come from the instance type
        ({"team": ("NotIn", ["a"])}, {"team": ("DoesNotExist", [])}, None),
    ],
)
def test_compatibility_as_karpenter(node: dict, pod: dict, conflict: str | None) -> None:
    node_requirements = Requirements(Requirement.create(k, *v) for k, v in node.items())
    pod_requirements = Requirements(Requirement.create(k, *v) for k, v in pod.items())
    found = node_requirements.conflict(pod_requirements, wk.WELL_KNOWN_LABELS)
    assert (found is None) if conflict is None else (conflict in found)


def test_quantities_use_kubernetes_parsing_and_round_up() -> None:
    assert parse_resource("cpu", "100m") == 100
    assert parse_resource("cpu", "1.5") == 1500
    assert parse_resource("memory", "1Gi") == 1024 * MIB
    with pytest.raises(ValueError, match="memory"):
        parse_resource("memory", "lots")


def test_a_remembered_quantity_parses_as_the_first_time_and_a_malformed_one_fails_every_time() -> None:
    # The same strings for different resources: cpu in millicores, the rest in base units.
    assert [parse_resource("cpu", "2"), parse_resource("memory", "2"), parse_resource("cpu", "2")] == [
        2000,
        2,
        2000,
    ]
    assert parse_resource("cpu", 1) == parse_resource("cpu", 1.0) == 1000
    for _ in range(2):  # a failure is not remembered as a value
        with pytest.raises(ValueError, match="memory: 'lots'"):
            parse_resource("memory", "lots")
    # A value no API server would accept, which cannot be remembered (a list): still a clear ValueError.
    with pytest.raises(ValueError, match="cpu"):
        parse_resource("cpu", ["1"])  # type: ignore[arg-type]


def test_a_tolerations_fields_must_be_strings_whether_or_not_it_was_read_before() -> None:
    from nodewright.api.tolerations import Toleration

    seen = {"key": "team", "operator": "Equal", "value": "a", "effect": "NoSchedule"}
    assert (
        Toleration.from_k8s(seen)
        == Toleration.from_k8s(dict(seen))
        == Toleration("team", "Equal", "a", "NoSchedule")
    )
    for malformed in ({"key": ["team"]}, {"key": "team", "value": 3}):
        with pytest.raises(ValueError, match="toleration"):
            Toleration.from_k8s(malformed)


def test_a_nodes_bound_pods_are_summed_from_the_pods_it_was_made_with() -> None:
    from nodewright.scheduling.existing import existing_node

    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": wk.HOSTNAME},
                {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": wk.ZONE},
            ]
        }
    }
    pods = [
        pod_from_k8s(
            {
                "metadata": {"name": f"db-{i}", "namespace": "data", "labels": {"app": "db"}},
                "spec": {
                    "nodeName": "n1",
                    "affinity": anti,
                    "containers": [
                        {
                            "name": "c",
                            "resources": {"requests": {"cpu": "250m", "memory": "1Gi"}},
                            "ports": [{"containerPort": 5432, "hostPort": 5432 + i}],
                        }
                    ],
                },
            }
        )
        for i in range(2)
    ]
    node = node_from_k8s(
        {
            "metadata": {"name": "n1", "labels": {wk.ZONE: "us-east-1a"}},
            "status": {"allocatable": {"cpu": "2", "memory": "8Gi", "pods": "10"}},
        },
        pods,
    )
    assert dict(node.bound.requests) == {"cpu": 500, "memory": 2048 * MIB, "pods": 2}
    assert [p.port for p in node.bound.host_ports] == [5432, 5433]
    assert [(ns, t.topology_key) for ns, t in node.bound.hostname_anti] == [("data", wk.HOSTNAME)] * 2
    assert [(ns, t.topology_key) for ns, t in node.bound.zone_anti] == [("data", wk.ZONE)] * 2
    # Each plan's entry starts from the summary and changes its own copies, never the Node's.
    entry = existing_node(node, ())
    assert entry.free == {"pods": 8, "cpu": 1500, "memory": 6144 * MIB}
    entry.add(pods[0].spec, dict(pods[0].spec.requests), 1)
    assert existing_node(node, ()).free == {"pods": 8, "cpu": 1500, "memory": 6144 * MIB}
    assert len(existing_node(node, ()).ports) == 2
    assert len(node.bound.host_ports) == 2


def test_a_pod_version_is_read_once_and_an_edited_or_unstored_pod_is_read_again() -> None:
    from nodewright.scheduling.model import SpecsByVersion

    def pod(version: str | None, cpu: str, node: str | None = "n1") -> dict[str, object]:
        metadata = {"name": "web-1", "namespace": "shop", "uid": "u-1", "labels": {"app": "web"}}
        if version:
            metadata["resourceVersion"] = version
        spec: dict[str, object] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
        if node:
            spec["nodeName"] = node
        return {"metadata": metadata, "spec": spec}

    specs: SpecsByVersion = {}
    bound = pod_from_k8s(pod("7", "500m"), specs)
    displaced = pod_from_k8s(pod("7", "500m", node=None), specs)
    assert displaced.spec is bound.spec
    assert (bound.node_name, displaced.node_name) == ("n1", None)
    edited = pod_from_k8s(pod("8", "2"), specs)  # a write is a new version
    assert dict(edited.spec.requests)["cpu"] == 2000
    unstored = pod_from_k8s(pod(None, "1"), specs)  # no version: read as it is, never remembered
    assert dict(unstored.spec.requests)["cpu"] == 1000
    assert len(specs) == 2
    pods, errors = pods_from_k8s([pod("9", "lots")], specs)  # a malformed pod: reported, not remembered
    assert pods == []
    assert "cpu" in errors["shop/web-1"]
    assert len(specs) == 2


def test_pod_requests_take_max_of_init_and_sum_of_containers_plus_overhead() -> None:
    requests = pod_requests(
        [{"cpu": 100, "memory": 10}, {"cpu": 200}], [{"cpu": 500}, {"memory": 5}], overhead={"cpu": 10}
    )
    assert requests == {"cpu": 510, "memory": 10, "pods": 1}


def test_m5_large_allocatable_matches_eks() -> None:
    it = instance_type_from_ec2(M5_LARGE, [Offering("us-east-1a", "on-demand", 0.096)])
    assert it.capacity["pods"] == 3 * (10 - 1) + 2 == 29
    assert it.capacity["memory"] == (8192 - 615) * MIB  # 7.5 % VM overhead, rounded up
    assert it.overhead.kube_reserved["memory"] == (11 * 29 + 255) * MIB
    assert it.overhead.kube_reserved["cpu"] == 70  # 6 % of the first core + 1 % of the second
    assert it.overhead.eviction_threshold["memory"] == 100 * MIB
    assert it.allocatable["cpu"] == 1930
    assert it.allocatable["memory"] == (8192 - 615 - 574 - 100) * MIB
    assert it.labels[wk.INSTANCE_CATEGORY] == "m"
    assert it.labels[wk.INSTANCE_FAMILY] == "m5"
    assert it.labels[wk.INSTANCE_GENERATION] == "5"
    assert it.labels[wk.INSTANCE_SIZE] == "large"
    assert it.labels[wk.ARCH] == "amd64"
    assert it.labels[wk.REGION] == "us-east-1"
    assert it.labels[wk.INSTANCE_NETWORK_BANDWIDTH] == "750"


@pytest.mark.parametrize(
    ("millicores", "reserved"), [(1000, 60), (2000, 70), (4000, 80), (8000, 90), (96000, 310)]
)
def test_cpu_reservation_ladder(millicores: int, reserved: int) -> None:
    assert kube_reserved_cpu(millicores) == reserved


def test_gpu_type_gets_extended_resource_and_gpu_labels() -> None:
    it = instance_type_from_ec2(G4DN, [])
    assert it.capacity["nvidia.com/gpu"] == 1
    assert it.labels[wk.INSTANCE_GPU_NAME] == "t4"
    assert it.labels[wk.INSTANCE_GPU_MANUFACTURER] == "nvidia"
    assert it.labels[wk.INSTANCE_GPU_MEMORY] == "16384"
    assert it.labels[wk.INSTANCE_LOCAL_NVME] == "125"


def test_kubelet_overrides_change_pods_and_reservations() -> None:
    kubelet = KubeletSettings(
        max_pods=110,
        pods_per_core=10,
        system_reserved={"cpu": "100m"},
        kube_reserved={"memory": "1Gi"},
        eviction_hard={"memory.available": "5%"},
    )
    it = instance_type_from_ec2(M5_LARGE, [], kubelet)
    assert it.capacity["pods"] == 20  # podsPerCore x vCPUs caps maxPods
    assert it.overhead.kube_reserved["memory"] == 1024 * MIB
    assert it.overhead.system_reserved["cpu"] == 100
    assert it.overhead.eviction_threshold["memory"] == -(-it.capacity["memory"] * 5 // 100)


def test_pod_from_k8s_reads_constraints() -> None:
    pod = pod_from_k8s(
        {
            "metadata": {"name": "web-1", "namespace": "shop", "labels": {"app": "web"}},
            "spec": {
                "containers": [
                    {
                        "name": "c",
                        "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}},
                        "ports": [{"containerPort": 80, "hostPort": 8080}],
                    }
                ],
                "nodeSelector": {"kubernetes.io/arch": "arm64"},
                "tolerations": [{"key": "dedicated", "operator": "Exists"}],
                "topologySpreadConstraints": [
                    {
                        "maxSkew": 1,
                        "topologyKey": wk.ZONE,
                        "whenUnsatisfiable": "DoNotSchedule",
                        "labelSelector": {"matchLabels": {"app": "web"}},
                    }
                ],
                "affinity": {
                    "podAntiAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [
                            {"topologyKey": wk.HOSTNAME, "labelSelector": {"matchLabels": {"app": "web"}}}
                        ]
                    }
                },
            },
        }
    )
    assert pod.key == "shop/web-1"
    assert pod.spec.request_map == {"cpu": 250, "memory": 256 * MIB, "pods": 1}
    assert pod.spec.host_ports[0].port == 8080
    assert pod.spec.spreads[0].selector.matches({"app": "web"})
    assert pod.spec.affinity[0].anti


def test_malformed_pod_is_reported_and_the_rest_parsed() -> None:
    good = {"metadata": {"name": "ok"}, "spec": {"containers": [{"name": "c"}]}}
    bad = {
        "metadata": {"name": "bad", "namespace": "x"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "lots"}}}]},
    }
    parsed, errors = pods_from_k8s([bad, good])
    assert [p.key for p in parsed] == ["default/ok"]
    assert "cpu: 'lots' is not a Kubernetes quantity" in errors["x/bad"]


def test_node_from_k8s_reads_allocatable_taints_and_cordon() -> None:
    parsed = node_from_k8s(
        {
            "metadata": {"name": "n1", "labels": {wk.ZONE: "us-east-1a"}},
            "spec": {"unschedulable": True, "taints": [{"key": "k", "value": "v", "effect": "NoExecute"}]},
            "status": {"allocatable": {"cpu": "1930m", "memory": "7Gi", "pods": "29"}},
        }
    )
    assert parsed.allocatable == {"cpu": 1930, "memory": 7 * 1024 * MIB, "pods": 29}
    assert parsed.unschedulable
    assert str(parsed.taints[0]) == "k=v:NoExecute"
