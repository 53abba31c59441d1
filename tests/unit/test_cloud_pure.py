"""Pure parts of the cloud package: the in-memory state store, NodeClass reading, AMI parameter names."""

from __future__ import annotations

import pytest
from nodewright.cloud.amis import ssm_parameters
from nodewright.cloud.eks import ClusterInfo
from nodewright.cloud.errors import InvalidNodeClassError
from nodewright.cloud.network import term_filters
from nodewright.cloud.nodeclass import NodeClass
from nodewright.cloud.pricetable import PriceTable
from nodewright.cloud.provider import parse_provider_id
from nodewright.cloud.state import InMemoryStateStore


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def test_unavailable_offering_expires_after_its_ttl() -> None:
    clock = Clock()
    store = InMemoryStateStore(clock=clock)
    store.mark_unavailable("m5.large", "us-east-1a", "spot", reason="InsufficientInstanceCapacity")
    assert store.is_unavailable("m5.large", "us-east-1a", "spot")
    assert not store.is_unavailable("m5.large", "us-east-1a", "on-demand")
    clock.now += 179
    assert store.unavailable_offerings() == {("m5.large", "us-east-1a", "spot")}
    clock.now += 2
    assert store.unavailable_offerings() == set()


def test_in_memory_markers_expire() -> None:
    clock = Clock()
    store = InMemoryStateStore(clock=clock)
    store.put_marker("k", "v", ttl=10)
    store.put_marker("forever", "x")
    assert (store.get_marker("k"), store.get_marker("forever"), store.get_marker("none")) == ("v", "x", None)
    clock.now += 11
    assert (store.get_marker("k"), store.get_marker("forever")) == (None, "x")


def test_price_table_round_trips_through_the_in_memory_store() -> None:
    store = InMemoryStateStore()
    table = PriceTable(on_demand={"m5.large": 0.096}, spot={("m5.large", "us-east-1a"): 0.04}, updated_at=10)
    store.put_price_table(table)
    assert store.price_table() == table


def test_nodeclass_family_comes_from_the_alias_and_custom_needs_terms() -> None:
    v1 = NodeClass(
        {"metadata": {"name": "a"}, "spec": {"amiSelectorTerms": [{"alias": "bottlerocket@latest"}]}}
    )
    assert (v1.name, v1.ami_family, v1.alias) == ("a", "Bottlerocket", "bottlerocket@latest")
    assert NodeClass({"amiSelectorTerms": [{"id": "ami-1"}]}).ami_family == "Custom"
    assert NodeClass({"spec": {"amiFamily": "AL2"}, "metadata": {"name": "b"}}).ami_family == "AL2"
    with pytest.raises(InvalidNodeClassError, match="unknown AMI alias 'ubuntu@latest'"):
        _ = NodeClass({"spec": {"amiSelectorTerms": [{"alias": "ubuntu@latest"}]}}).ami_family


def test_nodeclass_defaults_metadata_options_like_karpenter_and_hashes_its_spec() -> None:
    nc = NodeClass({"metadata": {"name": "a"}, "spec": {"metadataOptions": {"httpPutResponseHopLimit": 2}}})
    assert nc.metadata_options == {
        "httpEndpoint": "enabled",
        "httpProtocolIPv6": "disabled",
        "httpPutResponseHopLimit": 2,
        "httpTokens": "required",
    }
    same = NodeClass(
        {"metadata": {"name": "a", "uid": "x"}, "spec": {"metadataOptions": {"httpPutResponseHopLimit": 2}}}
    )
    assert nc.hash() == same.hash()
    assert nc.hash() != NodeClass({"metadata": {"name": "a"}, "spec": {}}).hash()


def test_nodeclass_accepts_a_model_that_dumps_itself() -> None:
    class Model:
        def model_dump(self, by_alias: bool = False) -> dict[str, object]:
            assert by_alias
            return {"metadata": {"name": "m"}, "spec": {"role": "R"}}

    assert NodeClass(Model()).role == "R"
    with pytest.raises(InvalidNodeClassError, match="v1 dict"):
        NodeClass(42)


@pytest.mark.parametrize(
    ("family", "version", "arch", "gpu", "expected"),
    [
        (
            "AL2023",
            "latest",
            "amd64",
            False,
            "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/standard/recommended/image_id",
        ),
        (
            "AL2023",
            "v20250101",
            "arm64",
            False,
            "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/arm64/standard/"
            "amazon-eks-node-al2023-arm64-standard-1.31-v20250101/image_id",
        ),
        (
            "AL2",
            "latest",
            "arm64",
            False,
            "/aws/service/eks/optimized-ami/1.31/amazon-linux-2-arm64/recommended/image_id",
        ),
        (
            "AL2",
            "v20240807",
            "amd64",
            True,
            "/aws/service/eks/optimized-ami/1.31/amazon-linux-2-gpu/amazon-eks-gpu-node-1.31-v20240807/image_id",
        ),
        (
            "Bottlerocket",
            "latest",
            "amd64",
            False,
            "/aws/service/bottlerocket/aws-k8s-1.31/x86_64/latest/image_id",
        ),
        (
            "Bottlerocket",
            "v1.22.0",
            "arm64",
            True,
            "/aws/service/bottlerocket/aws-k8s-1.31-nvidia/arm64/1.22.0/image_id",
        ),
        ("AL2023", "latest", "arm64", True, None),
    ],
)
def test_alias_ssm_parameter_names(
    family: str, version: str, arch: str, gpu: bool, expected: str | None
) -> None:
    assert ssm_parameters(family, version, "1.31", arch, gpu) == expected


def test_cluster_dns_is_the_tenth_address_of_the_service_cidr() -> None:
    assert ClusterInfo("c", "e", "ca", "1.31", "172.20.0.0/16").dns_ip == "172.20.0.10"


def test_selector_term_filters_and_wildcard_tags() -> None:
    filters = term_filters(
        {"id": "sg-1", "name": "nodes", "tags": {"a": "b", "c": "*"}}, "group-id", "group-name"
    )
    assert filters == [
        {"Name": "group-id", "Values": ["sg-1"]},
        {"Name": "group-name", "Values": ["nodes"]},
        {"Name": "tag:a", "Values": ["b"]},
        {"Name": "tag-key", "Values": ["c"]},
    ]


def test_provider_id_parsing_rejects_what_is_not_an_ec2_id() -> None:
    assert parse_provider_id("aws:///us-east-1a/i-0abc") == ("us-east-1a", "i-0abc")
    with pytest.raises(ValueError, match="aws:///"):
        parse_provider_id("kind://docker/node")


def test_clients_are_built_once_with_adaptive_retries_and_the_sandbox_endpoint() -> None:
    from nodewright.cloud import aws
    from nodewright.settings import Settings

    aws.reset_clients()
    settings = Settings(cluster_name="c1", region="eu-west-1", aws_endpoint_url="http://127.0.0.1:5000")
    ec2 = aws.client("ec2", settings)
    assert aws.client("ec2", settings) is ec2
    assert ec2.meta.endpoint_url == "http://127.0.0.1:5000"
    assert ec2.meta.region_name == "eu-west-1"
    assert ec2.meta.config.retries["mode"] == "adaptive"
    assert aws.client("pricing", settings, region=aws.PRICING_API_REGION).meta.region_name == "us-east-1"
    aws.reset_clients()


def test_a_client_signs_as_the_settings_credentials_and_is_cached_per_identity() -> None:
    """Lambda's environment gives one identity per container; the sandbox runs several functions in
    one process, so a client built for one must never sign for another."""
    from nodewright.cloud import aws
    from nodewright.settings import Settings

    aws.reset_clients()
    base = {"CLUSTER_NAME": "c1", "AWS_REGION": "eu-west-1"}
    first = Settings.from_env({**base, "AWS_ACCESS_KEY_ID": "AKIAFIRST", "AWS_SECRET_ACCESS_KEY": "s1"})
    second = Settings.from_env({**base, "AWS_ACCESS_KEY_ID": "AKIASECOND", "AWS_SECRET_ACCESS_KEY": "s2"})
    assert "s1" not in repr(first)  # the secret never shows in a repr (log lines)
    one, other = aws.client("ec2", first), aws.client("ec2", second)
    assert one is not other
    assert one._request_signer._credentials.access_key == "AKIAFIRST"
    assert other._request_signer._credentials.access_key == "AKIASECOND"
    assert aws.client("ec2", Settings.from_env({**base, "AWS_ACCESS_KEY_ID": "AKIAFIRST",
                                                "AWS_SECRET_ACCESS_KEY": "s1"})) is one  # fmt: skip
    assert (aws.identity(first), aws.identity(Settings.from_env(base))) == ("AKIAFIRST", None)
    aws.reset_clients()


def test_a_fleet_answer_is_read_into_the_instance_and_the_refused_offerings() -> None:
    from nodewright.cloud.amis import Image
    from nodewright.cloud.errors import FleetError
    from nodewright.cloud.provider import FleetRequest, parse_fleet_response

    image = Image(id="ami-1", name="al2023", arch="amd64", gpu=False)
    fleet = FleetRequest(
        params={},
        capacity_type="spot",
        image_by_template={"lt-a": image},
        prices={("m5.large", "us-east-1b"): 0.04},
        zone_of_subnet={"subnet-a": "us-east-1a", "subnet-b": "us-east-1b"},
    )
    refused = {
        "LaunchTemplateAndOverrides": {"Overrides": {"InstanceType": "c5.large", "SubnetId": "subnet-a"}},
        "ErrorCode": "InsufficientInstanceCapacity",
        "ErrorMessage": "none left",
    }
    other = {"LaunchTemplateAndOverrides": {"Overrides": {}}, "ErrorCode": "UnauthorizedOperation"}
    launched = {
        "InstanceIds": ["i-0123456789abcdef0"],
        "InstanceType": "m5.large",
        "Lifecycle": "spot",
        "LaunchTemplateAndOverrides": {
            "LaunchTemplateSpecification": {"LaunchTemplateName": "lt-a"},
            "Overrides": {"InstanceType": "m5.large", "SubnetId": "subnet-b"},
        },
    }

    outcome = parse_fleet_response({"Errors": [refused, other], "Instances": [launched]}, fleet)

    assert outcome.errors == (
        FleetError("InsufficientInstanceCapacity", "c5.large", "us-east-1a", "spot", "none left"),
        FleetError("UnauthorizedOperation", "", "", "spot", ""),
    )
    assert [e.insufficient_capacity for e in outcome.errors] == [True, False]
    assert outcome.launched is not None
    assert outcome.launched.provider_id == "aws:///us-east-1b/i-0123456789abcdef0"
    assert (outcome.launched.image_id, outcome.launched.price) == ("ami-1", 0.04)
    assert parse_fleet_response({"Instances": [{"InstanceIds": []}]}, fleet).launched is None
