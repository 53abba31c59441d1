"""The simulated kubelet's view of EC2: which instances are its cluster's."""

from __future__ import annotations

from typing import Any

import boto3
from moto import mock_aws

from sandbox.simulators.kubelet import NodeLifecycle, Registry


def test_the_cluster_s_instances_are_those_tagged_owned_or_with_its_eks_cluster_name() -> None:
    with mock_aws():
        ec2 = boto3.client("ec2", region_name="us-west-2")
        image = ec2.register_image(Name="node", RootDeviceName="/dev/xvda")["ImageId"]

        def launched(**tags: str) -> Any:
            specification = {
                "ResourceType": "instance",
                "Tags": [{"Key": k, "Value": v} for k, v in tags.items()],
            }
            reservation = ec2.run_instances(
                ImageId=image, MinCount=1, MaxCount=1, TagSpecifications=[specification]
            )
            return reservation["Instances"][0]["InstanceId"]

        owned = launched(**{"kubernetes.io/cluster/demo": "owned"})
        eks = launched(**{"eks:eks-cluster-name": "demo"})
        launched(**{"eks:eks-cluster-name": "other"})
        launched(**{"kubernetes.io/cluster/demo": "shared"})
        launched(team="x")
        lifecycle = NodeLifecycle(None, ec2, "demo", "us-west-2", Registry())  # type: ignore[arg-type]
        assert set(lifecycle._instances()) == {owned, eks}
