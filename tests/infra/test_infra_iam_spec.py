"""``nodewright.spec.iam`` and the synthesized roles agree: every question ``nodewright doctor`` asks
IAM about a deployed role (``spec.probes`` of ``spec.requirements``, filled from the stack's own
outputs as the doctor fills them) is allowed by that role's synthesized policy, judged by the
sandbox's evaluator; and a role missing a statement is refused its probe (the check can fail)."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import VARIANT_KMS_KEY_ARN
from iam_eval import ACCOUNT, REGION, Request, Template, decide_many
from infra_synth import Synth
from nodewright.cloud import readiness
from nodewright.spec import iam as spec

from sandbox.iam.evaluator import default_key_policy

CLUSTER = "demo"
VARIANT_ACCOUNT, VARIANT_REGION = "123456789012", "eu-west-1"  # the variant's own context


def _outputs(synth: Synth, template: Any) -> dict[str, str]:
    """The outputs the doctor reads to build its questions, as a deployed stack has them."""
    keys = (
        readiness.OUTPUT_FUNCTION_ROLES,
        readiness.OUTPUT_NODE_ROLE_ARN,
        readiness.OUTPUT_STATE_TABLE,
        readiness.OUTPUT_INTERRUPTION_QUEUE,
        readiness.OUTPUT_FAILURE_QUEUE,
        readiness.OUTPUT_WEBHOOK_SECRET,
        readiness.OUTPUT_WAKEUP_ALIAS,
        readiness.OUTPUT_FUNCTION_SUBNETS,
    )
    return {key: str(template.resolve(synth.template["Outputs"][key]["Value"])) for key in keys}


def _deployed(synth: Synth, account: str, region: str) -> tuple[dict[str, list[dict[str, Any]]], Any, bool]:
    """Function → its role's resolved statements; the spec's names as the doctor builds them from
    the outputs; whether the functions run in a VPC."""
    template = Template(synth.template, account, region)
    outputs = _outputs(synth, template)
    by_arn = {template.get_att(lid, "Arn"): lid for lid in synth.resources("AWS::IAM::Role")}
    roles = {
        function: template.role_statements(by_arn[arn])
        for function, arn in readiness.listed_pairs(outputs[readiness.OUTPUT_FUNCTION_ROLES]).items()
    }

    def known(key: str) -> str:
        return "" if outputs[key] == readiness.NONE else outputs[key]

    names = spec.Names(
        partition="aws",
        region=region,
        account=account,
        cluster=CLUSTER,
        cluster_arn=f"arn:aws:eks:{region}:{account}:cluster/{CLUSTER}",
        node_role_arn=known(readiness.OUTPUT_NODE_ROLE_ARN),
        table_arn=known(readiness.OUTPUT_STATE_TABLE),
        interruption_queue_arn=readiness.queue_arn(outputs[readiness.OUTPUT_INTERRUPTION_QUEUE]),
        failure_queue_arn=known(readiness.OUTPUT_FAILURE_QUEUE),
        webhook_secret_arn=known(readiness.OUTPUT_WEBHOOK_SECRET),
        wakeup_alias_arn=known(readiness.OUTPUT_WAKEUP_ALIAS),
    )
    return roles, names, outputs[readiness.OUTPUT_FUNCTION_SUBNETS] != readiness.NONE


def _requests(probe: spec.Probe, account: str) -> list[Request]:
    return [
        Request(
            action,
            resource,
            probe.context,
            resource_policy=default_key_policy(account) if action.startswith("kms:") else None,
        )
        for action in probe.actions
        for resource in probe.resources
    ]


def _refused(statements: list[dict[str, Any]], probes: list[spec.Probe], account: str) -> list[str]:
    requests = [(p.sid, r) for p in probes for r in _requests(p, account)]
    answers = decide_many(statements, [r for _, r in requests], account)
    return [
        f"{sid}: {r.action} on {r.resource} → {a}"
        for (sid, r), a in zip(requests, answers, strict=True)
        if a != "Allowed"
    ]


@pytest.mark.parametrize("which", ["default", "variant", "private"])
def test_every_role_allows_every_request_the_doctor_asks_about(
    which: str, default_synth: Synth, variant_synth: Synth, private_synth: Synth
) -> None:
    synth, account, region = {
        "default": (default_synth, ACCOUNT, REGION),
        "variant": (variant_synth, VARIANT_ACCOUNT, VARIANT_REGION),
        "private": (private_synth, ACCOUNT, REGION),
    }[which]
    roles, names, in_vpc = _deployed(synth, account, region)
    if which == "variant":  # the doctor cannot know the deploy's KMS keys; the infra test can
        names = spec.Names(**{**vars(names), "kms_key_arns": (VARIANT_KMS_KEY_ARN,)})
    expected = [f for f in spec.FUNCTIONS if f != spec.CERTIFICATE or which == "private"]
    assert sorted(roles) == sorted(expected)
    asked = 0
    for function, statements in roles.items():
        probes = spec.probes(spec.requirements(function, names, in_vpc=in_vpc), region, account)
        assert probes, function
        assert _refused(statements, probes, account) == [], function
        asked += sum(len(p.actions) * len(p.resources) for p in probes)
    assert asked > 100  # every grant's statements and the resource grants, all asked


def test_a_role_without_one_of_its_statements_is_refused_that_probe(default_synth: Synth) -> None:
    roles, names, _ = _deployed(default_synth, ACCOUNT, REGION)
    probes = spec.probes(spec.requirements("provisioner", names), REGION, ACCOUNT)
    without = [s for s in roles["provisioner"] if s.get("Sid") != "TagOnlyOnCreate"]
    refused = _refused(without, probes, ACCOUNT)
    assert refused
    assert all(line.startswith("TagOnlyOnCreate: ec2:CreateTags") for line in refused), refused


def test_probes_meet_the_conditions_the_code_meets() -> None:
    names = spec.Names(
        "aws", "eu-west-1", "123456789012", "prod", "arn:aws:eks:eu-west-1:1:cluster/prod", "r"
    )
    (tag,) = [
        p
        for p in spec.probes(spec.statements_for(("launch",), names), "eu-west-1", "123456789012")
        if p.sid == "TagOnlyOnCreate"
    ]
    assert tag.context == {
        "aws:RequestedRegion": "eu-west-1",
        "aws:RequestTag/kubernetes.io/cluster/prod": "owned",
        "aws:RequestTag/eks:eks-cluster-name": "prod",
        "aws:RequestTag/karpenter.sh/nodepool": spec.PROBE_ID,
        "ec2:CreateAction": "CreateFleet",
    }
    assert "arn:aws:ec2:eu-west-1:123456789012:instance/nodewright-doctor-probe" in tag.resources
    used = {
        p.actions: p.resources
        for p in spec.probes(spec.statements_for(("launch",), names), "eu-west-1", "1")
        if p.sid == "LaunchWithUsedResources"
    }
    # CreateFleet's security groups are authorized as the RunInstances it makes: asked apart
    assert "arn:aws:ec2:eu-west-1:1:security-group/nodewright-doctor-probe" in used[("ec2:RunInstances",)]
    assert "arn:aws:ec2:eu-west-1:1:security-group/nodewright-doctor-probe" not in used[("ec2:CreateFleet",)]
    assert "arn:aws:ec2:eu-west-1::image/nodewright-doctor-probe" in used[("ec2:CreateFleet",)]
