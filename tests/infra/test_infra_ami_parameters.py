"""The grant behind an EC2NodeClass's ``amiSelectorTerms[].ssmParameter``: SSM GetParameter on the
public AMI parameters always, and on this account's parameters only as ``-c amiSsmParameters``
names them (Karpenter's controller policy reads /aws/service/* only, too); and DescribePlacementGroups
with the placement-group resource a launch into one uses."""

from __future__ import annotations

import json

import pytest
from infra_synth import Synth
from test_infra_security import statement_for, statements

from infra.config import ConfigError, NodewrightConfig


def test_own_ami_parameters_are_readable_only_as_named(default_synth: Synth, variant_synth: Synth) -> None:
    assert [s for s in statements(default_synth) if s.get("Sid") == "AmiParameters"] == []
    statement = statement_for(variant_synth, "AmiParameters")
    assert statement["Action"] == "ssm:GetParameter"
    resources = json.dumps(statement["Resource"])
    assert resources.count(":ssm:") == 2
    assert ':parameter/platform/golden-ami"' in resources
    assert ':parameter/team-a/*"' in resources
    assert "/aws/service/" not in resources


def test_placement_groups_are_read_and_launched_into(default_synth: Synth) -> None:
    assert "ec2:DescribePlacementGroups" in statement_for(default_synth, "RegionalReads")["Action"]
    launch = [
        s
        for s in statements(default_synth)
        if "placement-group/*" in json.dumps(s.get("Resource"))
        and "ec2:CreateFleet" in json.dumps(s["Action"])
    ]
    assert launch


def test_a_parameter_name_without_its_slash_is_refused() -> None:
    with pytest.raises(ConfigError, match="amiSsmParameters"):
        NodewrightConfig(cluster_name="demo", ami_ssm_parameters=("platform/golden-ami",))
