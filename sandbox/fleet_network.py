"""moto's CreateFleet, made to give instances the network settings of their launch template, as EC2 does.

EC2 launches a fleet instance with the security groups its launch template names
(``SecurityGroupIds``, ``SecurityGroups`` by name, or the primary ``NetworkInterfaces`` entry's
``Groups``) on its primary network interface; DescribeInstances reports those groups. Only when the
template names none does the instance get the default security group of its subnet's VPC.

moto 5.2 reads a ``GroupSet`` key no launch template has, so every fleet instance got a default
group instead: on-demand ones the VPC's default on the interface and none at the top level, spot
ones the *default VPC's* default group (another VPC than their subnet's). Dynamic drift compares
an instance's groups with what its EC2NodeClass selects, so in the sandbox every spot node looked
``SecurityGroupDrift``-ed the moment it launched. This module corrects moto after it builds an
instant fleet, in-process (``ThreadedMotoServer`` serves from the same process, so the patch reaches
server mode too); :func:`install` and :func:`uninstall` nest, so a sandbox and an in-process moto
test can both hold it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from sandbox import fleet_storage

_lock = threading.Lock()
_original: dict[str, Callable[..., Any]] = {}
_holders: list[object] = []  # one entry per install() not yet undone


def template_groups(backend: Any, data: dict[str, Any], subnet_id: str | None) -> list[Any]:
    """The security groups EC2 gives an instance launched from template ``data`` into ``subnet_id``."""
    ids = list(data.get("SecurityGroupIds") or [])
    names = list(data.get("SecurityGroups") or [])
    for interface in data.get("NetworkInterfaces") or []:
        if int(interface.get("DeviceIndex") or 0) == 0:
            ids += list(interface.get("Groups") or [])
    vpc_id = backend.get_subnet(subnet_id).vpc_id if subnet_id else None
    groups = [group for group in (backend.get_security_group_from_id(i) for i in ids) if group is not None]
    groups += [
        group
        for group in (backend.get_security_group_from_name(n, vpc_id=vpc_id) for n in names)
        if group is not None
    ]
    if not groups:
        default = backend.get_default_security_group(vpc_id)
        groups = [default] if default is not None else []
    return groups


def _launched(fleet: Any) -> list[tuple[Any, Any]]:
    """(instance, launch spec) for every instance the fleet launched."""
    pairs = [(item["instance"], item.get("launch_spec")) for item in fleet.on_demand_instances]
    pairs += [(r.instance, r.launch_spec) for r in fleet.spot_requests if getattr(r, "instance", None)]
    return pairs


def _apply(fleet: Any) -> None:
    backend = fleet.ec2_backend
    for instance, spec in _launched(fleet):
        template_spec = getattr(spec, "launch_template_spec", None) or {}
        template_id = template_spec.get("LaunchTemplateId")
        if not template_id:
            continue
        template = backend.get_launch_template(template_id=template_id)
        version = template_spec.get("Version") or template.default_version_number
        data = template.get_version(version).data
        groups = template_groups(backend, data, instance.subnet_id)
        instance.security_groups = groups
        primary = getattr(instance, "nics", {}).get(0)
        if primary is not None:
            primary._group_set = list(groups)
        fleet_storage.apply(backend, instance, data)  # and its block devices (sandbox.fleet_storage)


def _fleet_init(self: Any, *args: Any, **kwargs: Any) -> None:
    _original["init"](self, *args, **kwargs)
    _apply(self)


def install() -> None:
    """Patch moto's ``Fleet`` (idempotent; each call needs its :func:`uninstall`)."""
    from moto.ec2.models.fleets import Fleet

    with _lock:
        if not _holders:
            _original["init"] = Fleet.__init__
            Fleet.__init__ = _fleet_init  # type: ignore[method-assign]
        _holders.append(object())


def uninstall() -> None:
    """Undo one :func:`install`; moto's own ``Fleet`` is back when the last holder leaves."""
    from moto.ec2.models.fleets import Fleet

    with _lock:
        if not _holders:
            return
        _holders.pop()
        if not _holders:
            Fleet.__init__ = _original.pop("init")  # type: ignore[method-assign]
