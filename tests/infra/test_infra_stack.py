"""Template assertions for each construct of the per-cluster stack."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from aws_cdk.assertions import Match
from infra_synth import Synth
from nodewright.spec.deployment import (
    CAPACITY_RESERVATION_INTERRUPTION,
    REBALANCE_RECOMMENDATION,
    SPOT_INTERRUPTION,
    STATE_CHANGE,
)

from infra import metrics
from infra.capabilities.functions import FUNCTION_SPECS
from sandbox.shared_data import REPO_ROOT

SPECS = {spec.name: spec for spec in FUNCTION_SPECS}


def function_named(synth: Synth, name: str) -> tuple[str, dict[str, Any]]:
    for logical_id, resource in synth.resources("AWS::Lambda::Function").items():
        if logical_id.startswith(f"AutoscalerFunctions{name.replace('_', '')}"):
            return logical_id, resource
    raise AssertionError(f"no function {name}")


def test_resource_counts_match_the_design(default_synth: Synth) -> None:
    template = default_synth.assertions
    expected = {
        "AWS::Lambda::Function": 7,  # five functions, the webhook, the removal at cdk destroy
        "AWS::Lambda::LayerVersion": 1,
        "AWS::Lambda::EventSourceMapping": 1,
        # every scheduled or rule-driven function, and the provisioner's wakeup alias
        "AWS::Lambda::EventInvokeConfig": 5,
        "AWS::Lambda::Alias": 1,
        "AWS::Lambda::Url": 1,
        "AWS::SecretsManager::Secret": 1,
        "AWS::SQS::Queue": 3,  # interruption queue, its DLQ, failed invocations
        "AWS::Events::Rule": 9,  # 5 to the queue, 1 direct, 3 schedules
        "AWS::DynamoDB::Table": 1,
        # 4 functions that call Kubernetes, the removal (it drains the nodes), the created node role
        "AWS::EKS::AccessEntry": 6,
        "AWS::CloudWatch::Dashboard": 1,
        # 2 DLQs, 6 functions x (errors, throttles), 2 heartbeats, pending, queue age, latency, five
        # launch failure classes, API server unreachable, AWS unreachable, invocations out of time,
        # the webhook's secret
        "AWS::CloudWatch::Alarm": 28,
        "AWS::IAM::Role": 8,  # one per function (webhook too), the removal's, the node role
        "AWS::CloudFormation::CustomResource": 1,
        "AWS::SNS::Topic": 0,  # only with alarmEmail
        "AWS::EC2::SecurityGroup": 0,  # only in a VPC
    }
    for kind, count in expected.items():
        template.resource_count_is(kind, count)


def test_state_table_has_the_shared_key_schema_ttl_pitr_and_encryption(default_synth: Synth) -> None:
    default_synth.assertions.has_resource(
        "AWS::DynamoDB::Table",
        {
            "Properties": {
                "KeySchema": [
                    {"AttributeName": "pk", "KeyType": "HASH"},
                    {"AttributeName": "sk", "KeyType": "RANGE"},
                ],
                "AttributeDefinitions": Match.array_with(
                    [
                        {"AttributeName": "pk", "AttributeType": "S"},
                        {"AttributeName": "sk", "AttributeType": "S"},
                    ]
                ),
                "BillingMode": "PAY_PER_REQUEST",
                "TimeToLiveSpecification": {"AttributeName": "expires_at", "Enabled": True},
                "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
                "SSESpecification": {"SSEEnabled": True},
            },
            "DeletionPolicy": "Delete",
        },
    )


def test_interruption_queue_keeps_messages_300s_with_sse_and_a_redrive_to_its_dlq(
    default_synth: Synth,
) -> None:
    queues = default_synth.resources("AWS::SQS::Queue")
    main = queues[next(k for k in queues if k.startswith("AutoscalerInterruptionsQueue"))]["Properties"]
    dlq_id = next(k for k in queues if k.startswith("AutoscalerInterruptionsDeadLetterQueue"))
    assert main["MessageRetentionPeriod"] == 300
    interruption = function_named(default_synth, "interruption")[1]["Properties"]
    # Lambda refuses an SQS event source whose visibility timeout is below the function's timeout.
    assert main["VisibilityTimeout"] >= interruption["Timeout"]
    assert main["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": [dlq_id, "Arn"]},
        "maxReceiveCount": 2,
    }
    # The DLQ move happens on the receive after the last allowed one, at maxReceiveCount
    # visibility timeouts: it must come before the retention drops the message.
    assert (
        main["VisibilityTimeout"] * main["RedrivePolicy"]["maxReceiveCount"] < main["MessageRetentionPeriod"]
    )
    for queue in queues.values():
        assert queue["Properties"]["SqsManagedSseEnabled"] is True


def _policy_of(synth: Synth, queue_prefix: str) -> list[dict[str, Any]]:
    for policy in synth.resources("AWS::SQS::QueuePolicy").values():
        queues = policy["Properties"]["Queues"]
        if any(q["Ref"].startswith(queue_prefix) for q in queues):
            return policy["Properties"]["PolicyDocument"]["Statement"]
    raise AssertionError(f"no queue policy for {queue_prefix}")


def test_queue_policy_is_tls_only_and_lets_only_eventbridge_send(default_synth: Synth) -> None:
    statements = _policy_of(default_synth, "AutoscalerInterruptionsQueue")
    deny = [s for s in statements if s["Effect"] == "Deny"]
    assert deny
    assert deny[0]["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    allowed = [s for s in statements if s["Effect"] == "Allow"]
    principals = {s["Principal"]["Service"] for s in allowed}
    assert principals == {"events.amazonaws.com"}  # no sqs.amazonaws.com: the DLQ move needs none
    for statement in allowed:
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        assert "sqs:SendMessage" in actions
        assert set(actions) <= {"sqs:SendMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl"}  # CDK's grant
        assert "aws:SourceArn" in statement["Condition"]["ArnEquals"]  # one per rule, scoped to it
    assert len(allowed) == 5


def _rules(synth: Synth) -> dict[str, dict[str, Any]]:
    return {k: v["Properties"] for k, v in synth.resources("AWS::Events::Rule").items()}


def test_queue_rules_match_the_five_interruption_event_kinds(default_synth: Synth) -> None:
    queue_rules = [r for k, r in _rules(default_synth).items() if k.startswith("AutoscalerInterruptions")]
    patterns = [r["EventPattern"] for r in queue_rules]
    assert {"source": ["aws.ec2"], "detail-type": [SPOT_INTERRUPTION]} in patterns
    assert {"source": ["aws.ec2"], "detail-type": [REBALANCE_RECOMMENDATION]} in patterns
    assert {"source": ["aws.ec2"], "detail-type": [STATE_CHANGE]} in patterns
    assert {"source": ["aws.ec2"], "detail-type": [CAPACITY_RESERVATION_INTERRUPTION]} in patterns
    assert {
        "source": ["aws.health"],
        "detail-type": ["AWS Health Event"],
        "detail": {"service": ["EC2"], "eventTypeCategory": ["scheduledChange"]},
    } in patterns
    for rule in queue_rules:
        (target,) = rule["Targets"]
        assert target["Arn"]["Fn::GetAtt"][0].startswith("AutoscalerInterruptionsQueue")
        assert target["DeadLetterConfig"]["Arn"]["Fn::GetAtt"][0].startswith(
            "AutoscalerInterruptionsDeadLetter"
        )


def test_direct_rule_sends_spot_warning_and_rebalance_to_spot_events(default_synth: Synth) -> None:
    spot_id, _ = function_named(default_synth, "spot_events")
    (direct,) = [r for k, r in _rules(default_synth).items() if k.startswith("AutoscalerSpotEvents")]
    assert direct["EventPattern"] == {
        "source": ["aws.ec2"],
        "detail-type": [SPOT_INTERRUPTION, REBALANCE_RECOMMENDATION],
    }
    (target,) = direct["Targets"]
    assert target["Arn"] == {"Fn::GetAtt": [spot_id, "Arn"]}
    assert target["RetryPolicy"]["MaximumRetryAttempts"] == 2
    assert "DeadLetterConfig" in target


@pytest.mark.parametrize(
    ("function", "expression"),
    [("provisioner", "rate(1 minute)"), ("disruption", "rate(1 minute)"), ("pricing", "rate(12 hours)")],
)
def test_schedules_invoke_their_function(default_synth: Synth, function: str, expression: str) -> None:
    function_id, _ = function_named(default_synth, function)
    scheduled = [
        r
        for r in _rules(default_synth).values()
        if r.get("Targets", [{}])[0].get("Arn", {}).get("Fn::GetAtt", [""])[0] == function_id
    ]
    assert [r["ScheduleExpression"] for r in scheduled] == [expression]
    assert scheduled[0]["Targets"][0]["RetryPolicy"]["MaximumRetryAttempts"] == 0


def test_every_function_runs_python313_on_one_architecture_with_the_layer(default_synth: Synth) -> None:
    (layer_id, _) = default_synth.one("AWS::Lambda::LayerVersion")
    functions = default_synth.resources("AWS::Lambda::Function")
    assert len({json.dumps(f["Properties"]["Architectures"]) for f in functions.values()}) == 1
    for name, spec in SPECS.items():
        _, function = function_named(default_synth, name)
        props = function["Properties"]
        assert props["Runtime"] == "python3.13"
        assert props["Architectures"] == ["arm64"]
        assert props["Handler"] == "app.handler"
        assert props["Layers"] == [{"Ref": layer_id}]
        assert props["MemorySize"] == spec.memory_mb
        assert props["Timeout"] == spec.timeout_seconds


def test_layer_is_compatible_with_the_functions_runtime_and_architecture(default_synth: Synth) -> None:
    _, layer = default_synth.one("AWS::Lambda::LayerVersion")
    assert layer["Properties"]["CompatibleRuntimes"] == ["python3.13"]
    assert layer["Properties"]["CompatibleArchitectures"] == ["arm64"]


def test_only_the_provisioner_and_the_direct_spot_path_have_reserved_concurrency(
    default_synth: Synth,
) -> None:
    from nodewright.spec.deployment import SPOT_EVENTS_CONCURRENCY

    wanted = {"provisioner": 1, "spot_events": SPOT_EVENTS_CONCURRENCY}
    for name in SPECS:
        _, function = function_named(default_synth, name)
        reserved = function["Properties"].get("ReservedConcurrentExecutions")
        assert reserved == wanted.get(name), name


def test_minute_scheduled_functions_end_before_the_next_tick(default_synth: Synth) -> None:
    for name in ("provisioner", "disruption"):
        _, function = function_named(default_synth, name)
        assert function["Properties"]["Timeout"] < 60


def test_interruption_reads_batches_of_ten_and_reports_item_failures(default_synth: Synth) -> None:
    interruption_id, _ = function_named(default_synth, "interruption")
    _, mapping = default_synth.one("AWS::Lambda::EventSourceMapping")
    props = mapping["Properties"]
    assert props["FunctionName"] == {"Ref": interruption_id}
    assert props["BatchSize"] == 10
    assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert props["ScalingConfig"] == {"MaximumConcurrency": 50}, "an AZ-wide reclaim's 50 batches at once"
    assert props["EventSourceArn"]["Fn::GetAtt"][0].startswith("AutoscalerInterruptionsQueue")


def test_async_functions_send_failures_to_the_failed_invocations_queue(default_synth: Synth) -> None:
    configs = default_synth.resources("AWS::Lambda::EventInvokeConfig")
    for config in configs.values():
        if config["Properties"]["Qualifier"] != "$LATEST":  # the wakeup alias: test_infra_wakeup.py
            continue
        destination = config["Properties"]["DestinationConfig"]["OnFailure"]["Destination"]
        assert destination["Fn::GetAtt"][0].startswith("AutoscalerFunctionsFailedInvocations")


def test_environment_matches_the_settings_the_layer_reads(default_synth: Synth) -> None:
    _, function = function_named(default_synth, "provisioner")
    env = function["Properties"]["Environment"]["Variables"]
    assert env["CLUSTER_NAME"] == "demo"
    (node_role_id,) = [
        k for k in default_synth.resources("AWS::IAM::Role") if k.startswith("AutoscalerNodeRole")
    ]
    assert env["NODE_ROLE"] == {"Ref": node_role_id}  # the created role's name
    assert env["REBALANCE_MODE"] == "replace"
    assert env["POLL_INTERVAL_SECONDS"] == "5"
    assert env["MIN_VALUES_POLICY"] == "Strict", "Karpenter's default"
    assert env["SPOT_TO_SPOT_CONSOLIDATION"] == "false", "off by default, as Karpenter's feature gate"
    assert env["NODE_OVERLAY"] == "false", "off by default, as Karpenter v1.14's feature gate"
    assert env["POWERTOOLS_METRICS_NAMESPACE"] == metrics.NAMESPACE
    assert env["POWERTOOLS_SERVICE_NAME"] == metrics.service_name("demo")
    assert env["NODEWRIGHT_TRACING"] == "false"
    assert env["STATIC_CAPACITY"] == "false"  # Karpenter v1.14's StaticCapacity gate is off by default
    assert env["STATE_TABLE"]["Ref"].startswith("AutoscalerStateTable")
    assert env["INTERRUPTION_QUEUE_URL"]["Ref"].startswith("AutoscalerInterruptionsQueue")
    # every variable the stack sets is one the layer (or Powertools) reads: no dead configuration
    settings_source = (REPO_ROOT / "layers/nodewright/nodewright/settings.py").read_text()
    for name in env:
        assert name.startswith("POWERTOOLS_") or f'"{name}"' in settings_source, name


def test_variant_context_reaches_the_functions(variant_synth: Synth) -> None:
    for name, function in variant_synth.resources("AWS::Lambda::Function").items():
        props = function["Properties"]
        assert props["Architectures"] == ["x86_64"]
        if name.startswith("AutoscalerRemoval"):
            continue
        env = props["Environment"]["Variables"]
        assert props["TracingConfig"] == {"Mode": "Active"}
        assert env["NODEWRIGHT_TRACING"] == "true"
        assert env["NODE_ROLE"] == "MyNodeRole"
        if name.startswith("AutoscalerWakeup"):  # the webhook needs neither
            continue
        assert env["REBALANCE_MODE"] == "event-only"
        assert env["POLL_INTERVAL_SECONDS"] == "2"
        assert env["MIN_VALUES_POLICY"] == "BestEffort"
        assert env["SPOT_TO_SPOT_CONSOLIDATION"] == "true"
        assert env["NODE_OVERLAY"] == "true"
        assert env["STATIC_CAPACITY"] == "true"
        assert env["NODE_ROLE"] == "MyNodeRole"


def test_in_a_vpc_the_cluster_functions_run_in_the_given_subnets_with_https_out_only(
    variant_synth: Synth, default_synth: Synth
) -> None:
    (group_id, group) = variant_synth.one("AWS::EC2::SecurityGroup")
    props = group["Properties"]
    assert props["VpcId"] == "vpc-0123456789abcdef0"
    assert "SecurityGroupIngress" not in props
    assert [
        (e["IpProtocol"], e["FromPort"], e["ToPort"], e["CidrIp"]) for e in props["SecurityGroupEgress"]
    ] == [("tcp", 443, 443, "0.0.0.0/0")]
    placed = {}
    for name in SPECS:
        _, function = function_named(variant_synth, name)
        placed[name] = function["Properties"].get("VpcConfig")
    expected = {
        "SubnetIds": ["subnet-0aaaaaaaaaaaaaaa1", "subnet-0bbbbbbbbbbbbbbb2"],
        "SecurityGroupIds": [{"Fn::GetAtt": [group_id, "GroupId"]}],
    }
    assert placed == {
        "provisioner": expected,
        "disruption": expected,
        "interruption": expected,
        "spot_events": expected,
        "pricing": None,  # the Pricing API has no VPC endpoint in most regions, and it needs no cluster
    }
    (removal,) = [
        f
        for k, f in variant_synth.resources("AWS::Lambda::Function").items()
        if k.startswith("AutoscalerRemoval")
    ]
    assert removal["Properties"]["VpcConfig"] == expected  # it drains the nodes: it calls the cluster
    outputs = json.dumps(variant_synth.template["Outputs"])
    assert group_id in outputs  # printed, to allow 443 from it on the cluster security group
    for name in SPECS:  # and outside a VPC, none is placed
        assert "VpcConfig" not in function_named(default_synth, name)[1]["Properties"]


def test_log_groups_have_the_names_the_docs_give(default_synth: Synth) -> None:
    from infra.capabilities.functions import log_group_name

    names = {g["Properties"]["LogGroupName"] for g in default_synth.resources("AWS::Logs::LogGroup").values()}
    assert names == {log_group_name("demo", n) for n in [*SPECS, "cleanup", "webhook"]}
    assert log_group_name("demo", "provisioner") == "/nodewright/demo/provisioner"
    deploy_doc = (REPO_ROOT / "docs" / "deploy.md").read_text()
    assert "/nodewright/<cluster>/provisioner" in deploy_doc


def _alarms(synth: Synth) -> list[dict[str, Any]]:
    return [a["Properties"] for a in synth.resources("AWS::CloudWatch::Alarm").values()]


def _alarms_by_id(synth: Synth) -> dict[str, dict[str, Any]]:
    return {k: a["Properties"] for k, a in synth.resources("AWS::CloudWatch::Alarm").items()}


def test_alarms_cover_dlqs_errors_throttles_heartbeats_pending_pods_queue_latency_and_ice(
    default_synth: Synth,
) -> None:
    alarms = _alarms(default_synth)
    by_metric: dict[str, list[dict[str, Any]]] = {}
    for alarm in alarms:
        by_metric.setdefault(alarm.get("MetricName", "(math)"), []).append(alarm)
    assert "ApproximateNumberOfMessagesVisible" not in by_metric  # depth stays high until purged
    depth = "ApproximateNumberOfMessagesVisible"
    dead_letters = [
        a
        for a in by_metric["(math)"]
        if any((q.get("MetricStat") or {}).get("Metric", {}).get("MetricName") == depth for q in a["Metrics"])
    ]
    assert len(dead_letters) == 2
    for alarm in dead_letters:  # a rise in depth: new messages alarm, an unpurged old one does not
        assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (0, "GreaterThanThreshold")
        (expression,) = [q["Expression"] for q in alarm["Metrics"] if "Expression" in q]
        assert expression == "DIFF(FILL(depth, REPEAT))"
    assert len(by_metric["Errors"]) == 6
    assert len(by_metric["Throttles"]) == 6
    (unreachable,) = by_metric[metrics.API_SERVER_UNAVAILABLE.name]
    assert (unreachable["Threshold"], unreachable["Period"], unreachable["Statistic"]) == (3, 300, "Sum")
    (out_of_time,) = by_metric[metrics.INVOCATIONS_OUT_OF_TIME.name]
    assert (out_of_time["Threshold"], out_of_time["Period"], out_of_time["Statistic"]) == (3, 900, "Sum")
    assert "API server was reachable" in out_of_time["AlarmDescription"]
    (latency,) = by_metric[metrics.INTERRUPTION_HANDLING_SECONDS.name]
    assert (latency["Threshold"], latency["ComparisonOperator"]) == (60, "GreaterThanThreshold")
    (queue_age,) = by_metric["ApproximateAgeOfOldestMessage"]
    assert queue_age["Dimensions"][0]["Value"]["Fn::GetAtt"][0].startswith("AutoscalerInterruptionsQueue")
    assert (queue_age["Threshold"], queue_age["ComparisonOperator"]) == (60, "GreaterThanThreshold")
    heartbeats = by_metric[metrics.PASSES_COMPLETED.name]
    assert sorted(d["Value"] for a in heartbeats for d in a["Dimensions"] if d["Name"] == "Function") == [
        "disruption",
        "provisioner",
    ]
    for heartbeat in heartbeats:  # silence is the failure: missing data breaches
        assert (heartbeat["Threshold"], heartbeat["ComparisonOperator"]) == (1, "LessThanThreshold")
        assert heartbeat["TreatMissingData"] == "breaching"
        assert (heartbeat["Period"], heartbeat["Statistic"]) == (300, "Sum")
    launches = {
        d["Value"]: a
        for a in by_metric[metrics.LAUNCH_FAILURES.name]
        for d in a["Dimensions"]
        if d["Name"] == "Class"
    }
    # a plain series per class, no SEARCH
    assert sorted(launches) == sorted(metrics.LAUNCH_FAILURE_CLASSES)
    assert launches[metrics.INSUFFICIENT_CAPACITY]["Threshold"] == 10
    assert launches[metrics.OTHER]["Threshold"] == 3
    for needs_a_person in (metrics.QUOTA, metrics.PERMISSION, metrics.INVALID_REQUEST):
        assert launches[needs_a_person]["Threshold"] == 1, needs_a_person
    assert "Service Quotas" in launches[metrics.QUOTA]["AlarmDescription"]
    assert "nodewright doctor" in launches[metrics.PERMISSION]["AlarmDescription"]
    for alarm in launches.values():
        assert (alarm["Statistic"], alarm["Period"], alarm["ComparisonOperator"]) == (
            "Sum",
            900,
            "GreaterThanOrEqualToThreshold",
        )
    for alarm in alarms:
        if alarm.get("Namespace") == metrics.NAMESPACE:
            assert alarm["MetricName"] in metrics.METRIC_NAMES
            assert {"Name": "service", "Value": "nodewright-demo"} in alarm["Dimensions"]
        expected_missing = (
            "breaching"
            if alarm.get("MetricName") == "PassesCompleted" or "pending" in alarm["AlarmDescription"]
            else "notBreaching"
        )
        assert alarm["TreatMissingData"] == expected_missing, alarm["AlarmDescription"]
        assert "AlarmActions" not in alarm  # no topic without alarmEmail / alarmTopicArn


def test_pods_pending_too_long_fires_when_the_provisioner_stops_looking(default_synth: Synth) -> None:
    """The oldest-pending-pod age comes from the provisioner alone; a provisioner that completes no
    pass emits nothing, so the alarm substitutes a value over its threshold for that silence."""
    (pending,) = [a for a in _alarms(default_synth) if "pending" in a["AlarmDescription"]]
    queries = {q["Id"]: q for q in pending["Metrics"]}
    (expression,) = [q["Expression"] for q in queries.values() if "Expression" in q]
    assert queries["age"]["MetricStat"]["Metric"]["MetricName"] == metrics.OLDEST_PENDING_POD_AGE.name
    passes = queries["passes"]["MetricStat"]["Metric"]
    assert passes["MetricName"] == metrics.PASSES_COMPLETED.name
    assert {"Name": "Function", "Value": "provisioner"} in passes["Dimensions"]
    threshold = pending["Threshold"]
    assert threshold == 600

    def evaluate(passes_sum: float | None, age: float | None) -> float:
        """CloudWatch's IF/FILL on one period's values (None: no data point)."""
        python = expression.replace("FILL(passes, 0)", repr(passes_sum or 0)).replace(
            "FILL(age, 0)", repr(age or 0)
        )
        condition, then, otherwise = python.removeprefix("IF(").removesuffix(")").split(", ")
        left, right = condition.split(" < ")
        return float(then) if float(left) < float(right) else float(otherwise)

    assert evaluate(None, None) > threshold  # the provisioner is silent: nobody sees pending pods
    assert evaluate(5, None) <= threshold  # running, nothing pending
    assert evaluate(5, 700) > threshold  # running, a pod pending for 11+ minutes
    assert evaluate(5, 300) <= threshold


def test_dashboard_graphs_every_metric_of_the_contract_and_is_named_with_the_region(
    default_synth: Synth, variant_synth: Synth
) -> None:
    _, dashboard = default_synth.one("AWS::CloudWatch::Dashboard")
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    for spec in metrics.ALL_METRICS:
        assert re.search(rf"\b{spec.name}\b", body), spec.name
    for resource_metric in ("Errors", "Duration", "Throttles", "ApproximateAgeOfOldestMessage"):
        assert resource_metric in body
    # dashboard names are account-wide: the same cluster in two regions must not collide
    assert dashboard["Properties"]["DashboardName"] == {
        "Fn::Join": ["", ["Nodewright-demo-", {"Ref": "AWS::Region"}]]
    }
    _, variant = variant_synth.one("AWS::CloudWatch::Dashboard")
    assert variant["Properties"]["DashboardName"] == "Nodewright-demo-eu-west-1"


def test_alarm_email_creates_a_tls_only_topic_cloudwatch_of_this_account_may_publish_to(
    variant_synth: Synth,
) -> None:
    topic_id, _ = variant_synth.one("AWS::SNS::Topic")
    variant_synth.assertions.has_resource_properties(
        "AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": "oncall@example.com"}
    )
    for alarm in _alarms(variant_synth):
        assert alarm["AlarmActions"] == [{"Ref": topic_id}]
        assert alarm["OKActions"] == [{"Ref": topic_id}]
    (policy,) = variant_synth.resources("AWS::SNS::TopicPolicy").values()
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    assert any(
        s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        for s in statements
    )
    (publish,) = [s for s in statements if s["Effect"] == "Allow"]
    assert publish["Principal"] == {"Service": "cloudwatch.amazonaws.com"}
    assert publish["Action"] == "sns:Publish"
    assert publish["Resource"] == {"Ref": topic_id}
    assert publish["Condition"] == {"StringEquals": {"aws:SourceAccount": "123456789012"}}


def test_without_an_alarm_target_synth_warns_that_nobody_will_be_told(default_synth: Synth) -> None:
    from aws_cdk.assertions import Annotations, Match

    from infra.capabilities.monitoring import NO_ALARM_TARGET_WARNING

    stack = default_synth.app.node.find_child("Nodewright-demo")
    Annotations.from_stack(stack).has_warning("*", Match.string_like_regexp("notify nobody"))
    outputs = [o["Value"] for o in default_synth.template["Outputs"].values()]
    assert "NONE: " + NO_ALARM_TARGET_WARNING in outputs


def test_the_stack_outputs_what_nodewright_doctor_reads(default_synth: Synth, variant_synth: Synth) -> None:
    from nodewright.cloud import readiness

    from infra.capabilities import outputs

    written = {v for k, v in vars(outputs).items() if k.isupper() and k != "NONE"}
    assert written == set(readiness.STACK_OUTPUTS)
    assert outputs.NONE == readiness.NONE
    default, variant = default_synth.template["Outputs"], variant_synth.template["Outputs"]
    assert set(readiness.STACK_OUTPUTS) <= set(default)
    assert set(readiness.STACK_OUTPUTS) <= set(variant)
    assert default[readiness.OUTPUT_FUNCTION_SUBNETS]["Value"] == "none"  # outside any VPC
    assert default[readiness.OUTPUT_ALARM_TOPIC]["Value"] == "none"
    assert (
        variant[readiness.OUTPUT_FUNCTION_SUBNETS]["Value"]
        == "subnet-0aaaaaaaaaaaaaaa1,subnet-0bbbbbbbbbbbbbbb2"
    )
    (topic_id, _) = variant_synth.one("AWS::SNS::Topic")
    assert variant[readiness.OUTPUT_ALARM_TOPIC]["Value"] == {"Ref": topic_id}
    roles = json.dumps(default[readiness.OUTPUT_CLUSTER_ACCESS_ROLES]["Value"])
    assert roles.count("AutoscalerFunctions") == 4
    assert "pricing" not in roles


def test_the_webhook_unable_to_read_its_secret_alarms_on_the_first_failure(default_synth: Synth) -> None:
    """Until the webhook can read its secret, every wake-up and v1beta1 conversion is refused; a
    failed reread keeps serving with the old one, but the role or key needs fixing before expiry."""
    (alarm,) = [a for k, a in _alarms_by_id(default_synth).items() if "WebhookSecretUnreadable" in k]
    assert alarm["MetricName"] == metrics.WEBHOOK_SECRET_ERRORS.name
    assert (alarm["Threshold"], alarm["ComparisonOperator"], alarm["Period"]) == (
        1,
        "GreaterThanOrEqualToThreshold",
        300,
    )
