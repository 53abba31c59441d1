"""moto's EC2 reading one resource's tags by its id, as EC2 does, rather than by scanning every tag.

moto (5.x) answers ``TaggedEC2Resource.get_tags`` -- which every instance's, volume's and network
interface's serialisation and every ``tag:``/``tag-key`` filter calls -- with ``describe_tags``
filtered on the resource id: a regular expression matched against every tag of every resource in
the region. A DescribeInstances over n tagged instances is then O(n²): 12 s for 500 instances (11
tags each) against 3.4 s unfiltered, on a loaded 2-core machine, where EC2 answers in about a
second. The sandbox's kubelet polls DescribeInstances while instances boot, and the product's
garbage collection lists its instances every pass, so a 500-node setup spent its time there.

The replacement returns the very list ``describe_tags(filters={"resource-id": [id]})`` does (a
resource id has no wildcard, so that filter matches that id alone), in the same order, from the
backend's own ``tags`` map: the same answer, in O(tags of the resource).
"""

from __future__ import annotations

from typing import Any


def _get_tags(self: Any) -> list[dict[str, str]]:
    from moto.ec2.utils import EC2_PREFIX_TO_RESOURCE, get_prefix

    resource_id = self.id
    if not resource_id:
        return []
    tags = self.ec2_backend.tags.get(resource_id) or {}
    resource_type = EC2_PREFIX_TO_RESOURCE.get(get_prefix(resource_id), "")
    return [
        {"resource_id": resource_id, "key": key, "value": value, "resource_type": resource_type}
        for key, value in list(tags.items())
    ]


def install() -> None:
    """Patch moto's ``TaggedEC2Resource.get_tags`` (idempotent; the answer is moto's own, so the
    patch stays for the process)."""
    from moto.ec2.models.core import TaggedEC2Resource

    TaggedEC2Resource.get_tags = _get_tags  # type: ignore[method-assign]
