"""Template assertions for each construct of the per-cluster stack."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from aws_cdk.assertions import Match
from infra_synth import Synth

from infra import metrics
from infra.capabilities.functions import FUNCTION_SPECS
from infra.capabilities.interruption_queue import (
    CAPACITY_RESERVATION_INTERRUPTION,
    REBALANCE_RECOMMENDATION,
    SPOT_INTERRUPTION,
    STATE_CHANGE,
)
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
        "AWS::Lambda::Function": 5,
        "AWS::Lambda::LayerVersion": 1,
        "AWS::Lambda::EventSourceMapping": 1,
        "AWS::Lambda::EventInvokeConfig": 4,  # every function but the SQS-driven one
        "AWS::SQS::Queue": 3,  # interruption queue, its DLQ, failed invocations
        "AWS::Events::Rule": 9,  # 5 to the queue, 1 direct, 3 schedules
        "AWS::DynamoDB::Table": 1,
        "AWS::EKS::AccessEntry": 1,
        "AWS::CloudWatch::Dashboard": 1,
        "AWS::CloudWatch::Alarm": 10,  # 2 DLQs, 5 functions, pending, latency, ICE
        "AWS::IAM::Role": 1,
        "AWS::SNS::Topic": 0,  # only with alarmEmail
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


def test_queue_policy_is_tls_only_and_lets_only_eventbridge_and_sqs_send(default_synth: Synth) -> None:
    statements = _policy_of(default_synth, "AutoscalerInterruptionsQueue")
    deny = [s for s in statements if s["Effect"] == "Deny"]
    assert deny
    assert deny[0]["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    allowed = [s for s in statements if s["Effect"] == "Allow"]
    principals = {s["Principal"]["Service"] for s in allowed}
    assert principals == {"events.amazonaws.com", "sqs.amazonaws.com"}
    for statement in allowed:
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        assert "sqs:SendMessage" in actions
        assert set(actions) <= {"sqs:SendMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl"}  # CDK's grant
        if statement["Principal"]["Service"] == "events.amazonaws.com":  # one per rule, scoped to it
            assert "aws:SourceArn" in statement["Condition"]["ArnEquals"]
    assert sum(s["Principal"]["Service"] == "events.amazonaws.com" for s in allowed) == 5


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
        assert props["Timeout"] == spec.timeout.to_seconds()


def test_layer_is_compatible_with_the_functions_runtime_and_architecture(default_synth: Synth) -> None:
    _, layer = default_synth.one("AWS::Lambda::LayerVersion")
    assert layer["Properties"]["CompatibleRuntimes"] == ["python3.13"]
    assert layer["Properties"]["CompatibleArchitectures"] == ["arm64"]


def test_only_the_provisioner_has_reserved_concurrency_one(default_synth: Synth) -> None:
    for name in SPECS:
        _, function = function_named(default_synth, name)
        reserved = function["Properties"].get("ReservedConcurrentExecutions")
        assert reserved == (1 if name == "provisioner" else None), name


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
    assert props["EventSourceArn"]["Fn::GetAtt"][0].startswith("AutoscalerInterruptionsQueue")


def test_async_functions_send_failures_to_the_failed_invocations_queue(default_synth: Synth) -> None:
    configs = default_synth.resources("AWS::Lambda::EventInvokeConfig")
    for config in configs.values():
        destination = config["Properties"]["DestinationConfig"]["OnFailure"]["Destination"]
        assert destination["Fn::GetAtt"][0].startswith("AutoscalerFunctionsFailedInvocations")


def test_environment_matches_the_settings_the_layer_reads(default_synth: Synth) -> None:
    _, function = function_named(default_synth, "provisioner")
    env = function["Properties"]["Environment"]["Variables"]
    assert env["CLUSTER_NAME"] == "demo"
    assert env["NODE_ROLE"] == "KarpenterNodeRole-demo"
    assert env["REBALANCE_MODE"] == "replace"
    assert env["POLL_INTERVAL_SECONDS"] == "5"
    assert env["POWERTOOLS_METRICS_NAMESPACE"] == metrics.NAMESPACE
    assert env["POWERTOOLS_SERVICE_NAME"] == metrics.service_name("demo")
    assert env["NODEWRIGHT_TRACING"] == "false"
    assert env["STATE_TABLE"]["Ref"].startswith("AutoscalerStateTable")
    assert env["INTERRUPTION_QUEUE_URL"]["Ref"].startswith("AutoscalerInterruptionsQueue")
    # every variable the stack sets is one the layer (or Powertools) reads: no dead configuration
    settings_source = (REPO_ROOT / "layers/nodewright/nodewright/settings.py").read_text()
    for name in env:
        assert name.startswith("POWERTOOLS_") or f'"{name}"' in settings_source, name


def test_variant_context_reaches_the_functions(variant_synth: Synth) -> None:
    for function in variant_synth.resources("AWS::Lambda::Function").values():
        props = function["Properties"]
        env = props["Environment"]["Variables"]
        assert props["Architectures"] == ["x86_64"]
        assert props["TracingConfig"] == {"Mode": "Active"}
        assert env["NODEWRIGHT_TRACING"] == "true"
        assert env["REBALANCE_MODE"] == "event-only"
        assert env["POLL_INTERVAL_SECONDS"] == "2"
        assert env["NODE_ROLE"] == "MyNodeRole"


def _alarms(synth: Synth) -> list[dict[str, Any]]:
    return [a["Properties"] for a in synth.resources("AWS::CloudWatch::Alarm").values()]


def test_alarms_cover_dlqs_errors_pending_pods_latency_and_ice(default_synth: Synth) -> None:
    alarms = _alarms(default_synth)
    by_metric: dict[str, list[dict[str, Any]]] = {}
    for alarm in alarms:
        by_metric.setdefault(alarm.get("MetricName", "(math)"), []).append(alarm)
    assert len(by_metric["ApproximateNumberOfMessagesVisible"]) == 2
    for alarm in by_metric["ApproximateNumberOfMessagesVisible"]:
        assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (0, "GreaterThanThreshold")
    assert len(by_metric["Errors"]) == 5
    (pending,) = by_metric[metrics.OLDEST_PENDING_POD_AGE.name]
    assert pending["Threshold"] == 600
    (latency,) = by_metric[metrics.INTERRUPTION_HANDLING_SECONDS.name]
    assert (latency["Threshold"], latency["ComparisonOperator"]) == (60, "GreaterThanThreshold")
    # ICE: LaunchErrors summed over the no-capacity codes (an alarm cannot use SEARCH).
    (ice,) = by_metric["(math)"]
    (expression,) = [q for q in ice["Metrics"] if "Expression" in q]
    codes = [q["MetricStat"]["Metric"] for q in ice["Metrics"] if "MetricStat" in q]
    assert {c["MetricName"] for c in codes} == {metrics.LAUNCH_ERRORS.name}
    assert sorted(d["Value"] for c in codes for d in c["Dimensions"] if d["Name"] == "ErrorCode") == sorted(
        metrics.INSUFFICIENT_CAPACITY_CODES
    )
    assert expression["Expression"].count("FILL(") == len(metrics.INSUFFICIENT_CAPACITY_CODES)
    assert ice["Threshold"] == 10
    for alarm in alarms:
        if alarm.get("Namespace") == metrics.NAMESPACE:
            assert alarm["MetricName"] in metrics.METRIC_NAMES
            assert alarm["Dimensions"] == [{"Name": "service", "Value": "nodewright-demo"}]
        assert alarm["TreatMissingData"] == "notBreaching"
        assert "AlarmActions" not in alarm  # no topic without alarmEmail / alarmTopicArn


def test_dashboard_graphs_every_metric_of_the_contract(default_synth: Synth) -> None:
    _, dashboard = default_synth.one("AWS::CloudWatch::Dashboard")
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    for spec in metrics.ALL_METRICS:
        assert re.search(rf"\b{spec.name}\b", body), spec.name
    for resource_metric in ("Errors", "Duration", "Throttles", "ApproximateAgeOfOldestMessage"):
        assert resource_metric in body


def test_alarm_email_creates_a_tls_only_topic_every_alarm_notifies(variant_synth: Synth) -> None:
    topic_id, _ = variant_synth.one("AWS::SNS::Topic")
    variant_synth.assertions.has_resource_properties(
        "AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": "oncall@example.com"}
    )
    for alarm in _alarms(variant_synth):
        assert alarm["AlarmActions"] == [{"Ref": topic_id}]
    (policy,) = variant_synth.resources("AWS::SNS::TopicPolicy").values()
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    assert any(
        s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        for s in statements
    )
