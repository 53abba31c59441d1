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

It also gives each instance the instance profile its launch template names (moto 5.2 ignored it:
DescribeInstances showed none, so "which profiles do live instances use" was always "none"), and
refuses, as EC2 does, the overrides of a template whose profile does not exist: an instant fleet
launches nothing from them and answers one ``InvalidParameterValue`` error per override ("Value (x)
for parameter iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name", what
Karpenter logs as a fleet error, aws/karpenter-provider-aws#3051) instead of an instance without
a role. The IAM side (``iam:PassRole`` on the profile's role, ``iam:PassedToService``) is
``sandbox.iam.authorization``'s.

And it makes a subnet's private IPs safe to hand out to concurrent launches, as EC2's are: moto
draws them from one generator per subnet, which a second thread entering raises ``ValueError:
generator already executing`` (a provisioning pass's parallel launches met it).
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable
from typing import Any

from sandbox.aws import fleet_storage

_lock = threading.Lock()
# moto hands out a subnet's private IPs from one generator per subnet; two launches into the subnet
# at once (a pass's parallel launches, served by the server's threads) make the second raise
# ``ValueError: generator already executing``, which EC2 never answers. Its IP bookkeeping is
# serialised under this lock.
_subnet_ips = threading.RLock()
_original: dict[str, Callable[..., Any]] = {}
_SUBNET_IP_METHODS = ("get_available_subnet_ip", "request_ip", "del_subnet_ip")
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
        fleet_storage.apply(backend, instance, data)  # and its block devices (sandbox.aws.fleet_storage)
        profile = data.get("IamInstanceProfile") or {}
        if profile.get("Name") or profile.get("Arn"):
            backend.associate_iam_instance_profile(
                instance_id=instance.id,
                iam_instance_profile_name=profile.get("Name"),
                iam_instance_profile_arn=profile.get("Arn"),
            )


def profile_refusal(backend: Any, data: dict[str, Any]) -> str | None:
    """EC2's message when launch template ``data`` names an instance profile that does not exist
    (by name or ARN, or by a name and an ARN of two profiles); None when it names none or one that does."""
    from moto.ec2.utils import filter_iam_instance_profiles

    profile = data.get("IamInstanceProfile") or {}
    name, arn = profile.get("Name"), profile.get("Arn")
    if not (name or arn):
        return None
    try:
        found = filter_iam_instance_profiles(backend.account_id, backend.partition, arn, name)
    except Exception:  # moto's IAM NoSuchEntity
        found = None
    if found is not None:
        return None
    if arn:
        return (
            f"Value ({arn}) for parameter iamInstanceProfile.arn is invalid. Invalid IAM Instance Profile ARN"
        )
    return (
        f"Value ({name}) for parameter iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name"
    )


def template_data(backend: Any, spec: dict[str, Any]) -> dict[str, Any]:
    """The data of the template version a ``LaunchTemplateSpecification`` names ({} when it names
    no template; moto's not-found error when the template does not exist)."""
    if "LaunchTemplateId" in spec:
        template = backend.get_launch_template(template_id=spec["LaunchTemplateId"])
    elif "LaunchTemplateName" in spec:
        template = backend.get_launch_template_by_name(name=spec["LaunchTemplateName"])
    else:
        return {}
    version = spec.get("Version")
    if version in (None, "$Default"):
        version = template.default_version_number
    elif version == "$Latest":
        version = template.latest_version_number
    return dict(template.get_version(version).data)


def fleet_error(
    spec: dict[str, Any], override: dict[str, Any], capacity_type: str, code: str, message: str
) -> dict[str, Any]:
    """One entry of an instant fleet's ``Errors``: the override EC2 could not launch, and why."""
    return {
        "LaunchTemplateAndOverrides": {
            "LaunchTemplateSpecification": dict(spec),
            "Overrides": dict(override),
        },
        "Lifecycle": capacity_type,
        "ErrorCode": code,
        "ErrorMessage": message,
    }


def _refuse_missing_profiles(
    backend: Any, configs: list[dict[str, Any]], capacity_type: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The launch template configs EC2 would launch from, and an error per override of the others."""
    kept: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    for config in configs:
        spec = config.get("LaunchTemplateSpecification") or {}
        try:
            refusal = profile_refusal(backend, template_data(backend, spec))
        except Exception:  # a template that does not exist: moto answers it
            refusal = None
        if refusal is None:
            kept.append(config)
            continue
        errors += [
            fleet_error(spec, override, capacity_type, "InvalidParameterValue", refusal)
            for override in config.get("Overrides") or [{}]
        ]
    return kept, errors


def _fleet_init(self: Any, *args: Any, **kwargs: Any) -> None:
    bound = inspect.signature(_original["init"]).bind(self, *args, **kwargs)
    arguments = bound.arguments
    capacity = dict(arguments.get("target_capacity_specification") or {})
    capacity_type = capacity.get("DefaultTargetCapacityType") or "on-demand"
    kept, errors = _refuse_missing_profiles(
        arguments["ec2_backend"], list(arguments.get("launch_template_configs") or []), capacity_type
    )
    if errors:
        if not kept:  # nothing left to launch from: the fleet launches nothing
            capacity.update(TotalTargetCapacity=0, OnDemandTargetCapacity=0, SpotTargetCapacity=0)
        arguments["launch_template_configs"] = kept
        arguments["target_capacity_specification"] = capacity
    _original["init"](*bound.args, **bound.kwargs)
    self.sandbox_errors = errors
    _apply(self)


def _create_fleet_response(self: Any) -> Any:
    """moto's answer, with the errors of the overrides the fleet refused (``_fleet_init``)."""
    result = _original["response"](self)
    body = getattr(result, "result", None)
    if isinstance(body, dict) and body.get("FleetId"):
        fleet = self.ec2_backend.fleets.get(body["FleetId"])
        errors = list(getattr(fleet, "sandbox_errors", None) or [])
        if errors:
            body["Errors"] = [*(body.get("Errors") or []), *errors]
    return result


def _serialised(method: Callable[..., Any]) -> Callable[..., Any]:
    def under_lock(self: Any, *args: Any, **kwargs: Any) -> Any:
        with _subnet_ips:
            return method(self, *args, **kwargs)

    return under_lock


def install() -> None:
    """Patch moto's ``Fleet``, its CreateFleet answer and its subnets' IP bookkeeping (idempotent;
    each needs its :func:`uninstall`)."""
    from moto.ec2.models.fleets import Fleet
    from moto.ec2.models.subnets import Subnet
    from moto.ec2.responses.fleets import Fleets

    with _lock:
        if not _holders:
            _original["init"] = Fleet.__init__
            _original["response"] = Fleets.create_fleet
            Fleet.__init__ = _fleet_init
            Fleets.create_fleet = _create_fleet_response
            for name in _SUBNET_IP_METHODS:
                _original[name] = getattr(Subnet, name)
                setattr(Subnet, name, _serialised(_original[name]))
        _holders.append(object())


def uninstall() -> None:
    """Undo one :func:`install`; moto's own ``Fleet`` is back when the last holder leaves."""
    from moto.ec2.models.fleets import Fleet
    from moto.ec2.models.subnets import Subnet
    from moto.ec2.responses.fleets import Fleets

    with _lock:
        if not _holders:
            return
        _holders.pop()
        if not _holders:
            Fleet.__init__ = _original.pop("init")
            Fleets.create_fleet = _original.pop("response")
            for name in _SUBNET_IP_METHODS:
                setattr(Subnet, name, _original.pop(name))
