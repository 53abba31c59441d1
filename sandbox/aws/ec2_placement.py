"""Placement groups and an instance's placement, taught to moto's EC2 as EC2 has them.

moto 5.2 implements neither CreatePlacementGroup nor DescribePlacementGroups (both answer
``NotImplementedError``), and a fleet instance launched from a template whose ``Placement`` names a
group or a tenancy comes out with ``Placement: {GroupName: "", Tenancy: "default"}``: a launch into
a placement group that does not exist succeeds, and a Dedicated Instance is recorded as a shared one.
EC2 refuses the first and records the second. This module adds, in-process (``ThreadedMotoServer``
serves from the same process, so the sandbox's server mode gets it too):

- ``CreatePlacementGroup`` (``cluster``, ``spread``, ``partition`` with 1-7 partitions; a duplicate
  name is ``InvalidPlacementGroup.Duplicate``), ``DescribePlacementGroups`` (by ``GroupNames`` or
  ``GroupIds``; an unknown one is ``InvalidPlacementGroup.Unknown``, as EC2 answers), and
  ``DeletePlacementGroup`` (``InvalidPlacementGroup.InUse`` while a running instance is in it);
- CreateFleet refusing a launch template whose ``Placement`` names an unknown group
  (``InvalidPlacementGroup.Unknown``), and every instance it launches carrying its template's
  placement: ``GroupName``, ``GroupId``, ``PartitionNumber`` (EC2 spreads a partition group's
  instances over its partitions), ``Tenancy``.

:func:`install` and :func:`uninstall` nest, like ``sandbox.aws.fleet_network``'s.
"""

from __future__ import annotations

import itertools
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

_lock = threading.Lock()
_original: dict[str, Callable[..., Any]] = {}
_original_actions: dict[str, Callable[..., Any] | None] = {}  # None: moto has no such action
_holders: list[object] = []
STRATEGIES = ("cluster", "spread", "partition")


@dataclass
class PlacementGroup:
    """One placement group; attribute names are the output shape's, snake_cased, for moto's serializer."""

    group_name: str
    group_id: str
    strategy: str
    partition_count: int | None
    group_arn: str
    state: str = "available"
    tags: list[dict[str, str]] = field(default_factory=list)
    _next_partition: Any = None

    def next_partition(self) -> int | None:
        if self.strategy != "partition" or not self.partition_count:
            return None
        if self._next_partition is None:
            self._next_partition = itertools.cycle(range(1, self.partition_count + 1))
        return int(next(self._next_partition))


def _groups(backend: Any) -> dict[str, PlacementGroup]:
    """The backend's placement groups by name (kept on the backend: one store per account and region)."""
    store = backend.__dict__.get("_nodewright_placement_groups")
    if store is None:
        store = backend.__dict__.setdefault("_nodewright_placement_groups", {})
    return store


def _error(code: str, message: str) -> Exception:
    from moto.ec2.exceptions import EC2ClientError

    return EC2ClientError(code, message)


def find(backend: Any, *, name: str | None = None, group_id: str | None = None) -> PlacementGroup:
    """The group named or identified, or EC2's ``InvalidPlacementGroup.Unknown``."""
    for group in _groups(backend).values():
        if (name and group.group_name == name) or (group_id and group.group_id == group_id):
            return group
    raise _error("InvalidPlacementGroup.Unknown", f"The Placement Group '{name or group_id}' is unknown.")


def _create(self: Any) -> Any:
    from moto.core.responses import ActionResult

    name = self._get_param("GroupName")
    strategy = self._get_param("Strategy")
    partitions = self._get_int_param("PartitionCount")
    if not name:
        raise _error("MissingParameter", "The request must contain the parameter groupName")
    if strategy not in STRATEGIES:
        raise _error("InvalidParameterValue", f"Value ({strategy}) for parameter strategy is invalid.")
    if partitions is not None and (strategy != "partition" or not 1 <= partitions <= 7):
        raise _error(
            "InvalidParameterValue",
            "PartitionCount is valid only with the partition strategy, from 1 to 7.",
        )
    tags = self._parse_tag_specification("placement-group").get("placement-group", {})
    self.error_on_dryrun()
    backend = self.ec2_backend
    with _lock:
        if name in _groups(backend):
            raise _error("InvalidPlacementGroup.Duplicate", f"The Placement Group '{name}' already exists.")
        group_id = f"pg-{secrets.token_hex(9)[:17]}"
        group = PlacementGroup(
            group_name=name,
            group_id=group_id,
            strategy=strategy,
            partition_count=(partitions or 2) if strategy == "partition" else None,
            group_arn=f"arn:aws:ec2:{backend.region_name}:{backend.account_id}:placement-group/{name}",
            tags=[{"Key": k, "Value": v} for k, v in tags.items()],
        )
        _groups(backend)[name] = group
    return ActionResult({"PlacementGroup": group})


def _describe(self: Any) -> Any:
    from moto.core.responses import ActionResult

    names = self._get_param("GroupNames", [])
    ids = self._get_param("GroupIds", [])
    backend = self.ec2_backend
    if names or ids:
        found = [find(backend, name=n) for n in names] + [find(backend, group_id=i) for i in ids]
    else:
        found = list(_groups(backend).values())
    return ActionResult({"PlacementGroups": found})


def _delete(self: Any) -> Any:
    from moto.core.responses import ActionResult

    name = self._get_param("GroupName")
    self.error_on_dryrun()
    backend = self.ec2_backend
    group = find(backend, name=name)
    for instance in backend.all_instances():
        if instance.state not in ("terminated", "shutting-down") and instance.placement.group_name == name:
            raise _error("InvalidPlacementGroup.InUse", f"The Placement Group '{name}' is in use.")
    _groups(backend).pop(group.group_name, None)
    return ActionResult({})


def _template_placement(backend: Any, config: dict[str, Any]) -> dict[str, Any]:
    spec = config.get("LaunchTemplateSpecification") or {}
    template_id, template_name = spec.get("LaunchTemplateId"), spec.get("LaunchTemplateName")
    template = (
        backend.get_launch_template(template_id)
        if template_id
        else backend.get_launch_template_by_name(template_name)
    )
    version = spec.get("Version") or template.default_version_number
    if version == "$Latest":
        version = template.latest_version_number
    elif version == "$Default":
        version = template.default_version_number
    return dict(template.get_version(version).data.get("Placement") or {})


def _create_fleet(self: Any, *args: Any, **kwargs: Any) -> Any:
    """CreateFleet as EC2: an unknown placement group is refused before any instance starts, and
    each instance carries its template's placement."""
    configs = kwargs.get("launch_template_configs")
    if configs is None and len(args) > 3:
        configs = args[3]
    placements = [_template_placement(self, c) for c in configs or []]
    for placement in placements:
        if placement.get("GroupName") or placement.get("GroupId"):
            find(self, name=placement.get("GroupName"), group_id=placement.get("GroupId"))
    fleet = _original["create_fleet"](self, *args, **kwargs)
    from sandbox.aws.fleet_network import _launched

    for instance, spec in _launched(fleet):
        template_spec = getattr(spec, "launch_template_spec", None) or {}
        config = {"LaunchTemplateSpecification": template_spec}
        placement = _template_placement(self, config) if template_spec else {}
        if placement.get("GroupName") or placement.get("GroupId"):
            group = find(self, name=placement.get("GroupName"), group_id=placement.get("GroupId"))
            instance.placement.group_name = group.group_name
            instance.placement.group_id = group.group_id
            instance.placement.partition_number = group.next_partition()
        if placement.get("Tenancy"):
            instance.placement.tenancy = placement["Tenancy"]
    return fleet


def install() -> None:
    """Patch moto's EC2 (idempotent; each call needs its :func:`uninstall`)."""
    from moto.ec2.models import EC2Backend
    from moto.ec2.responses import EC2Response

    with _lock:
        if not _holders:
            _original["create_fleet"] = EC2Backend.create_fleet
            EC2Backend.create_fleet = _create_fleet
            for action, handler in (
                ("create_placement_group", _create),
                ("describe_placement_groups", _describe),
                ("delete_placement_group", _delete),
            ):
                _original_actions[action] = getattr(EC2Response, action, None)
                setattr(EC2Response, action, handler)
        _holders.append(object())


def uninstall() -> None:
    """Undo one :func:`install`; moto's own EC2 is back when the last holder leaves."""
    from moto.ec2.models import EC2Backend
    from moto.ec2.responses import EC2Response

    with _lock:
        if not _holders:
            return
        _holders.pop()
        if _holders:
            return
        EC2Backend.create_fleet = _original.pop("create_fleet")
        for action in ("create_placement_group", "describe_placement_groups", "delete_placement_group"):
            original = _original_actions.pop(action, None)
            if original is None:
                delattr(EC2Response, action)
            else:
                setattr(EC2Response, action, original)
