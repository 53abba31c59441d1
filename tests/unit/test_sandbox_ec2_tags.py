"""moto's EC2 behind the sandbox reads a resource's tags by its id: the same answer as moto's scan."""

from __future__ import annotations

import boto3
from moto import mock_aws
from moto.ec2.models.core import TaggedEC2Resource

from sandbox.aws import ec2_tags


def test_a_resource_s_tags_are_moto_s_own_answer_read_by_its_id() -> None:
    with mock_aws():
        ec2 = boto3.client("ec2", region_name="us-west-2")
        image = ec2.register_image(Name="node", RootDeviceName="/dev/xvda")["ImageId"]
        # Ids that are prefixes of nothing and tags that share keys: the scan's regex and the lookup agree.
        ids = [
            ec2.run_instances(
                ImageId=image,
                MinCount=1,
                MaxCount=1,
                TagSpecifications=[
                    {
                        "ResourceType": "instance",
                        "Tags": [{"Key": "n", "Value": str(i)}, {"Key": "k", "Value": "v"}],
                    }
                ],
            )["Instances"][0]["InstanceId"]
            for i in range(3)
        ]
        from moto.ec2.models import ec2_backends

        backend = ec2_backends["123456789012"]["us-west-2"]
        instances = {i.id: i for r in backend.all_reservations() for i in r.instances}
        scanned = {i: backend.describe_tags(filters={"resource-id": [i]}) for i in ids}
        ec2_tags.install()
        assert TaggedEC2Resource.get_tags is ec2_tags._get_tags
        assert {i: instances[i].get_tags() for i in ids} == scanned
        assert scanned[ids[0]] == [
            {"resource_id": ids[0], "key": "n", "value": "0", "resource_type": "instance"},
            {"resource_id": ids[0], "key": "k", "value": "v", "resource_type": "instance"},
        ]
        # Filters and answers that read the tags still work through it.
        found = ec2.describe_instances(Filters=[{"Name": "tag:n", "Values": ["1"]}])["Reservations"]
        assert [i["InstanceId"] for r in found for i in r["Instances"]] == [ids[1]]
        assert {"Key": "k", "Value": "v"} in found[0]["Instances"][0]["Tags"]
