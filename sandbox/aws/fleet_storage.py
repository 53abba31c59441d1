"""moto's CreateFleet, made to give instances the block devices EC2 gives them.

EC2 builds an instance's volumes from its AMI's block device mapping, with the launch template's
``BlockDeviceMappings`` laid over it device by device (a template mapping for the AMI's root device
resizes the root volume; one for another device adds a volume), and reports the AMI's root device as
the instance's ``RootDeviceName``. moto 5.2 launches a fleet instance without its template's mappings:
every instance got one 8 GiB ``/dev/sda1``, so a 200 GiB root volume an EC2NodeClass asks for never
existed and the sandbox's kubelet could not report what a real node would.

``apply`` corrects one fleet instance after moto builds it; ``sandbox.aws.fleet_network`` calls it for every
instance of an instant fleet (its install and uninstall cover both corrections). RunInstances, which
Nodewright never calls, is left as moto answers it (its ``BlockDeviceMappings`` are honoured, an
AMI's are not).
"""

from __future__ import annotations

from typing import Any

from sandbox.aws.eks_amis import block_devices


def apply(backend: Any, instance: Any, data: dict[str, Any]) -> None:
    """Replace the volumes moto gave ``instance`` by the ones its AMI and template ``data`` give."""
    ami = backend.amis.get(getattr(instance, "image_id", None) or data.get("ImageId"))
    tags: dict[str, str] = {}
    for device, mapping in list(instance.block_device_mapping.items()):
        volume = backend.get_volume(mapping.volume_id)
        tags.update({t["key"]: t["value"] for t in volume.get_tags()})
        backend.detach_volume(volume.id, instance.id, device)
        backend.delete_volume(volume.id)
    wanted: dict[str, dict[str, Any]] = {}
    for device, size in block_devices(ami) if ami is not None else ():
        wanted[device] = {"VolumeSize": size, "DeleteOnTermination": True, "VolumeType": "gp3"}
    for mapping in data.get("BlockDeviceMappings") or []:
        if mapping.get("NoDevice") is not None:
            wanted.pop(mapping["DeviceName"], None)
            continue
        ebs = mapping.get("Ebs") or {}
        base = wanted.get(mapping["DeviceName"], {"VolumeSize": 8, "DeleteOnTermination": True})
        wanted[mapping["DeviceName"]] = {**base, **{k: v for k, v in ebs.items() if v is not None}}
    for device, ebs in wanted.items():
        instance.add_block_device(
            int(ebs["VolumeSize"]),
            device,
            ebs.get("SnapshotId"),
            bool(ebs.get("Encrypted", False)),
            bool(ebs.get("DeleteOnTermination", True)),
            ebs.get("KmsKeyId"),
            volume_type=ebs.get("VolumeType"),
        )
        if tags:
            backend.get_volume(instance.block_device_mapping[device].volume_id).add_tags(tags)
    if ami is not None:
        instance.root_device_name = ami.root_device_name
