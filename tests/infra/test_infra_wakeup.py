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


@pytest.mark.parametrize(("synth", "seconds"), [("default_synth", 60.0), ("variant_synth", 15.0)])
def test_the_webhook_rereads_its_secret_as_often_as_the_context_says(
    synth: str, seconds: float, request: pytest.FixtureRequest
) -> None:
    """``-c webhookSecretMaxAge`` (a minute when absent) reaches the webhook's settings."""
    from nodewright.settings import Settings

    _, webhook = _one_starting(
        request.getfixturevalue(synth), "AWS::Lambda::Function", "AutoscalerWakeupwebhook"
    )
    env = webhook["Properties"]["Environment"]["Variables"]
    settings = Settings.from_env(
        {
            "CLUSTER_NAME": "demo",
            "AWS_REGION": "us-east-1",
            "WEBHOOK_SECRET_MAX_AGE_SECONDS": env["WEBHOOK_SECRET_MAX_AGE_SECONDS"],
        }
    )
    assert settings.webhook_secret_max_age_seconds == seconds


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("soon", "webhookSecretMaxAge 'soon' is not a number"),
        ("0", "webhookSecretMaxAge 0: use 1-3600 seconds"),
        ("86400", "webhookSecretMaxAge 86400: use 1-3600 seconds"),
    ],
)
def test_a_secret_reread_interval_out_of_range_is_refused_at_synth(value: str, message: str) -> None:
    from infra.config import ConfigError, NodewrightConfig

    with pytest.raises(ConfigError, match=message):
        NodewrightConfig.from_context({"clusterName": "demo", "webhookSecretMaxAge": value}.get)


def test_wakeup_false_leaves_the_whole_path_out(without_wakeup: Synth) -> None:
    template = without_wakeup.template
    kinds = {r["Type"] for r in template["Resources"].values()}
    assert not kinds & {
        "AWS::Lambda::Url",
        "AWS::Lambda::Alias",
        "AWS::SecretsManager::Secret",
        "AWS::ElasticLoadBalancingV2::LoadBalancer",
        "AWS::EC2::SecurityGroup",
    }
    assert len(without_wakeup.resources("AWS::Lambda::Function")) == 6
    assert not [a for a in without_wakeup.resources("AWS::CloudWatch::Alarm") if "Webhook" in a]
    for key in (
        outputs.WEBHOOK_URL,
        outputs.WEBHOOK_SECRET,
        outputs.WAKEUP_ALIAS,
        outputs.WAKEUP_CERTIFICATE,
        outputs.WAKEUP_LOAD_BALANCER,
    ):
        assert template["Outputs"][key]["Value"] == outputs.NONE, key
    assert template["Outputs"][outputs.WAKEUP_MODE]["Value"] == "off"
    assert "webhook" not in str(template["Outputs"][outputs.FUNCTION_ROLES]["Value"])


# --- -c wakeup=private ------------------------------------------------------------------------


def test_private_mode_has_no_public_endpoint_at_all(private_synth: Synth) -> None:
    """No function URL, and no Lambda permission for any principal but a service's, scoped to one
    source: nothing outside the account can call anything."""
    assert private_synth.resources("AWS::Lambda::Url") == {}
    for permission in private_synth.resources("AWS::Lambda::Permission").values():
        props = permission["Properties"]
        assert props["Principal"] != "*", props
        assert props["Principal"].endswith(".amazonaws.com"), props
        assert "FunctionUrlAuthType" not in props
        assert props["Action"] == "lambda:InvokeFunction"
        assert "SourceArn" in props, props
    (invoke,) = [
        p["Properties"]
        for p in private_synth.resources("AWS::Lambda::Permission").values()
        if p["Properties"]["Principal"] == "elasticloadbalancing.amazonaws.com"
    ]
    webhook_id, _ = _one_starting(private_synth, "AWS::Lambda::Function", "AutoscalerWakeupwebhook")
    assert invoke["FunctionName"] == {"Fn::GetAtt": [webhook_id, "Arn"]}
    _, group = private_synth.one("AWS::ElasticLoadBalancingV2::TargetGroup")
    assert group["Properties"]["Name"] in str(invoke["SourceArn"])  # that target group only
    assert invoke["SourceAccount"] == {"Ref": "AWS::AccountId"}


def test_private_mode_is_an_internal_load_balancer_only_the_cluster_security_group_reaches(
    private_synth: Synth,
) -> None:
    from conftest import PRIVATE_CLUSTER_SG

    _, balancer = private_synth.one("AWS::ElasticLoadBalancingV2::LoadBalancer")
    props = balancer["Properties"]
    assert (props["Scheme"], props["Type"]) == ("internal", "application")
    assert props["Subnets"] == ["subnet-0aaaaaaaaaaaaaaa1", "subnet-0bbbbbbbbbbbbbbb2"]
    (group_ref,) = props["SecurityGroups"]
    group = private_synth.template["Resources"][group_ref["Fn::GetAtt"][0]]["Properties"]
    assert group["VpcId"] == "vpc-0123456789abcdef0"
    (ingress,) = group["SecurityGroupIngress"]
    assert (ingress["IpProtocol"], ingress["FromPort"], ingress["ToPort"]) == ("tcp", 443, 443)
    assert ingress["SourceSecurityGroupId"] == PRIVATE_CLUSTER_SG
    assert "CidrIp" not in ingress
    (egress,) = group["SecurityGroupEgress"]
    assert egress["CidrIp"] == "255.255.255.255/32"  # nothing: a Lambda target needs no network
    attributes = {a["Key"]: a["Value"] for a in props["LoadBalancerAttributes"]}
    assert attributes["routing.http.drop_invalid_header_fields.enabled"] == "true"
    assert attributes["access_logs.s3.enabled"] == "false"  # the path is the secret


def test_private_mode_serves_https_with_the_stacks_certificate_and_forwards_only_admit_and_convert(
    private_synth: Synth,
) -> None:
    _, listener = private_synth.one("AWS::ElasticLoadBalancingV2::Listener")
    props = listener["Properties"]
    assert (props["Protocol"], props["Port"]) == ("HTTPS", 443)
    assert props["SslPolicy"].startswith("ELBSecurityPolicy-TLS13-1-2")
    certificate_id, certificate = _one_starting(
        private_synth, "AWS::CloudFormation::CustomResource", "AutoscalerWakeupPrivateCertificate"
    )
    assert props["Certificates"] == [{"CertificateArn": {"Fn::GetAtt": [certificate_id, "CertificateArn"]}}]
    balancer_id, _ = private_synth.one("AWS::ElasticLoadBalancingV2::LoadBalancer")
    assert certificate["Properties"]["DnsName"] == {"Fn::GetAtt": [balancer_id, "DNSName"]}
    ((default,),) = [props["DefaultActions"]]
    assert default["FixedResponseConfig"]["StatusCode"] == "404"  # anything else never invokes
    _, rule = private_synth.one("AWS::ElasticLoadBalancingV2::ListenerRule")
    conditions = {c["Field"]: c for c in rule["Properties"]["Conditions"]}
    assert conditions["http-request-method"]["HttpRequestMethodConfig"]["Values"] == ["POST"]
    assert conditions["path-pattern"]["PathPatternConfig"]["Values"] == ["/*/admit", "/*/convert"]
    group_id, group = private_synth.one("AWS::ElasticLoadBalancingV2::TargetGroup")
    assert rule["Properties"]["Actions"] == [{"TargetGroupArn": {"Ref": group_id}, "Type": "forward"}]
    webhook_id, _ = _one_starting(private_synth, "AWS::Lambda::Function", "AutoscalerWakeupwebhook")
    assert group["Properties"]["Targets"] == [{"Id": {"Fn::GetAtt": [webhook_id, "Arn"]}}]
    out = private_synth.template["Outputs"]
    assert out[outputs.WAKEUP_MODE]["Value"] == "private"
    assert out[outputs.WEBHOOK_URL]["Value"] == {
        "Fn::Join": ["", ["https://", {"Fn::GetAtt": [balancer_id, "DNSName"]}, "/"]]
    }
    assert out[outputs.WAKEUP_CERTIFICATE]["Value"] == {"Fn::GetAtt": [certificate_id, "CertificateArn"]}


def test_the_certificate_function_can_import_and_delete_only_this_clusters_certificates(
    private_synth: Synth,
) -> None:
    from iam_eval import REGION, Request, Template, allowed, decide

    role_id, _ = _one_starting(private_synth, "AWS::IAM::Role", "AutoscalerWakeupPrivateCertificate")
    statements = Template(private_synth.template).role_statements(role_id)
    certificate = f"arn:aws:acm:{REGION}:111122223333:certificate/1234"
    ours = {"kubernetes.io/cluster/demo": "owned", "eks:eks-cluster-name": "demo"}
    other = {"kubernetes.io/cluster/other": "owned", "eks:eks-cluster-name": "other"}

    def tags(prefix: str, values: dict[str, str]) -> dict[str, str]:
        return {f"{prefix}/{k}": v for k, v in values.items()}

    for action in ("acm:ImportCertificate", "acm:AddTagsToCertificate"):
        assert allowed(statements, Request(action, certificate, tags("aws:RequestTag", ours)))
        assert not allowed(statements, Request(action, certificate, tags("aws:RequestTag", other)))
        assert not allowed(statements, Request(action, certificate))
    assert allowed(statements, Request("acm:DeleteCertificate", certificate, tags("aws:ResourceTag", ours)))
    assert decide(
        statements, Request("acm:DeleteCertificate", certificate, tags("aws:ResourceTag", other))
    ) == ("ImplicitlyDenied")
    assert not allowed(statements, Request("acm:GetCertificate", certificate, tags("aws:ResourceTag", ours)))


def test_public_mode_stays_the_default_and_true_still_means_it(
    default_synth: Synth, fast_context: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> None:
    assert default_synth.template["Outputs"][outputs.WAKEUP_MODE]["Value"] == "public"
    assert default_synth.resources("AWS::ElasticLoadBalancingV2::LoadBalancer") == {}
    from infra.config import NodewrightConfig

    assert NodewrightConfig.from_context({**fast_context, "wakeup": "true"}.get).wakeup == "public"
    assert NodewrightConfig(cluster_name="x", wakeup=True).wakeup == "public"  # an older caller's bool
    assert NodewrightConfig(cluster_name="x", wakeup=False).wakeup == "off"


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ({"wakeup": "sometimes"}, "wakeup 'sometimes': use public, private or false"),
        ({"wakeup": "private"}, "wakeup=private needs -c vpcId"),
        (
            {
                "wakeup": "private",
                "vpcId": "vpc-0123456789abcdef0",
                "subnetIds": "subnet-0aaaaaaaaaaaaaaa1,subnet-0bbbbbbbbbbbbbbb2",
            },
            "wakeup=private needs -c clusterSecurityGroupId",
        ),
        (
            {
                "wakeup": "private",
                "vpcId": "vpc-0123456789abcdef0",
                "wakeupSubnetIds": "subnet-0aaaaaaaaaaaaaaa1",
                "clusterSecurityGroupId": "sg-0ccccccccccccccc3",
            },
            "two or more private subnets",
        ),
        ({"clusterSecurityGroupId": "sg-0ccccccccccccccc3"}, "for -c wakeup=private only"),
        ({"wakeup": "private", "clusterSecurityGroupId": "cluster"}, "is not a security group id"),
    ],
)
def test_a_private_wakeup_without_its_network_is_refused_with_the_flag_to_fix(
    context: dict[str, str], message: str
) -> None:
    from infra.config import ConfigError, NodewrightConfig

    with pytest.raises(ConfigError, match=message):
        NodewrightConfig.from_context({"clusterName": "demo", **context}.get)


def test_a_private_load_balancer_may_have_subnets_of_its_own_with_the_functions_outside_the_vpc() -> None:
    from infra.config import NodewrightConfig

    config = NodewrightConfig.from_context(
        {
            "clusterName": "demo",
            "wakeup": "private",
            "vpcId": "vpc-0123456789abcdef0",
            "wakeupSubnetIds": "subnet-0aaaaaaaaaaaaaaa1,subnet-0bbbbbbbbbbbbbbb2",
            "clusterSecurityGroupId": "sg-0ccccccccccccccc3",
        }.get
    )
    assert not config.in_vpc
    assert config.load_balancer_subnets == ("subnet-0aaaaaaaaaaaaaaa1", "subnet-0bbbbbbbbbbbbbbb2")
