"""The wake-up path in the template: function URL, webhook, its role, the secret, the alias, outputs."""

from __future__ import annotations

from typing import Any

import pytest
from infra_synth import Synth, synth_app

from infra.capabilities import outputs
from infra.capabilities.wakeup import WAKEUP_ALIAS, WEBHOOK_CONCURRENCY


def _one_starting(synth: Synth, kind: str, prefix: str) -> tuple[str, dict[str, Any]]:
    (found,) = [(k, v) for k, v in synth.resources(kind).items() if k.startswith(prefix)]
    return found


def _statements(synth: Synth, role_id: str) -> list[dict[str, Any]]:
    return [
        statement
        for policy in synth.resources("AWS::IAM::Policy").values()
        if {"Ref": role_id} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def test_the_function_url_is_public_and_points_at_the_webhook(default_synth: Synth) -> None:
    _, url = default_synth.one("AWS::Lambda::Url")
    webhook_id, webhook = _one_starting(default_synth, "AWS::Lambda::Function", "AutoscalerWakeupwebhook")
    assert url["Properties"]["AuthType"] == "NONE"
    assert url["Properties"]["TargetFunctionArn"] == {"Fn::GetAtt": [webhook_id, "Arn"]}
    permissions = [
        p["Properties"]
        for p in default_synth.resources("AWS::Lambda::Permission").values()
        if p["Properties"].get("FunctionUrlAuthType") == "NONE"
    ]
    assert [p["Action"] for p in permissions] == ["lambda:InvokeFunctionUrl"]
    props = webhook["Properties"]
    assert props["ReservedConcurrentExecutions"] == WEBHOOK_CONCURRENCY
    assert props["Handler"] == "app.handler"
    assert props["Timeout"] <= 10


def test_the_webhook_role_can_only_invoke_the_wakeup_alias_read_its_secret_and_log(
    default_synth: Synth,
) -> None:
    role_id, _ = _one_starting(default_synth, "AWS::IAM::Role", "AutoscalerWakeupWebhookRole")
    alias_id, _ = default_synth.one("AWS::Lambda::Alias")
    secret_id, _ = default_synth.one("AWS::SecretsManager::Secret")
    actions: dict[str, Any] = {}
    for statement in _statements(default_synth, role_id):
        assert statement["Effect"] == "Allow"
        for action in [statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"]:
            actions[action] = statement["Resource"]
    assert actions["lambda:InvokeFunction"] == {"Ref": alias_id}
    assert actions["secretsmanager:GetSecretValue"] == {"Ref": secret_id}
    assert actions["secretsmanager:DescribeSecret"] == {"Ref": secret_id}
    logs = {a for a in actions if a.startswith("logs:")}
    assert logs
    assert all(actions[a]["Fn::GetAtt"][0].startswith("AutoscalerWakeupwebhookLogs") for a in logs)
    assert set(actions) - logs == {
        "lambda:InvokeFunction",
        "secretsmanager:GetSecretValue",
        "secretsmanager:DescribeSecret",
    }
    # and no access entry: the webhook cannot talk to the cluster
    entries = default_synth.resources("AWS::EKS::AccessEntry").values()
    assert all(e["Properties"]["PrincipalArn"] != {"Fn::GetAtt": [role_id, "Arn"]} for e in entries)


def test_the_webhook_can_read_the_previous_version_of_its_secret_during_a_rotation(
    default_synth: Synth,
) -> None:
    """The webhook accepts AWSCURRENT and AWSPREVIOUS during a rotation window: a grant limited to
    one version stage would refuse the old path before install-webhooks had replaced it."""
    role_id, _ = _one_starting(default_synth, "AWS::IAM::Role", "AutoscalerWakeupWebhookRole")
    reads = [s for s in _statements(default_synth, role_id) if "secretsmanager:GetSecretValue" in s["Action"]]
    assert reads
    assert all("Condition" not in s for s in reads)


def test_a_wakeup_is_never_retried_expires_in_a_minute_and_goes_to_no_failure_queue(
    default_synth: Synth,
) -> None:
    alias_id, alias = default_synth.one("AWS::Lambda::Alias")
    provisioner_id, _ = _one_starting(
        default_synth, "AWS::Lambda::Function", "AutoscalerFunctionsprovisioner"
    )
    assert alias["Properties"]["Name"] == WAKEUP_ALIAS
    assert alias["Properties"]["FunctionName"] == {"Ref": provisioner_id}
    assert alias["Properties"]["FunctionVersion"] == "$LATEST"
    (config,) = [
        c["Properties"]
        for c in default_synth.resources("AWS::Lambda::EventInvokeConfig").values()
        if alias_id in str(c["Properties"]["Qualifier"])
    ]
    assert config["MaximumRetryAttempts"] == 0
    assert config["MaximumEventAgeInSeconds"] == 60
    assert "DestinationConfig" not in config
    _, webhook = _one_starting(default_synth, "AWS::Lambda::Function", "AutoscalerWakeupwebhook")
    assert webhook["Properties"]["Environment"]["Variables"]["WAKE_FUNCTION"] == {"Ref": alias_id}


def test_the_secret_is_generated_per_stack_and_only_its_arn_is_output(default_synth: Synth) -> None:
    secret_id, secret = default_synth.one("AWS::SecretsManager::Secret")
    generated = secret["Properties"]["GenerateSecretString"]
    assert generated["PasswordLength"] >= 32
    assert generated["ExcludePunctuation"] is True
    assert "SecretString" not in secret["Properties"]
    out = default_synth.template["Outputs"]
    assert out[outputs.WEBHOOK_SECRET]["Value"] == {"Ref": secret_id}
    url_id, _ = default_synth.one("AWS::Lambda::Url")
    assert out[outputs.WEBHOOK_URL]["Value"] == {"Fn::GetAtt": [url_id, "FunctionUrl"]}
    _, webhook = _one_starting(default_synth, "AWS::Lambda::Function", "AutoscalerWakeupwebhook")
    assert webhook["Properties"]["Environment"]["Variables"]["WEBHOOK_SECRET_ARN"] == {"Ref": secret_id}


@pytest.fixture(scope="module")
def without_wakeup(fast_context: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synth_app({**fast_context, "wakeup": "false"}, tmp_path_factory.mktemp("cdk.out"))


def test_wakeup_false_leaves_the_whole_path_out(without_wakeup: Synth) -> None:
    template = without_wakeup.template
    kinds = {r["Type"] for r in template["Resources"].values()}
    assert not kinds & {"AWS::Lambda::Url", "AWS::Lambda::Alias", "AWS::SecretsManager::Secret"}
    assert len(without_wakeup.resources("AWS::Lambda::Function")) == 6
    assert template["Outputs"][outputs.WEBHOOK_URL]["Value"] == outputs.NONE
    assert template["Outputs"][outputs.WEBHOOK_SECRET]["Value"] == outputs.NONE
