"""The sandbox wires the functions as the CDK stack does: same identity, schedules, rules, sizes.

``sandbox/`` cannot import the CDK app (aws_cdk starts a jsii runtime), so it keeps plain copies;
these tests hold them equal to the stack's own definitions.
"""

from __future__ import annotations

import yaml

from infra.capabilities import functions, interruption_queue, removal, schedules, wakeup
from infra.capabilities.cluster_access import CLEANUP_GROUP, KUBERNETES_GROUP
from infra.capabilities.functions import FUNCTION_SPECS
from infra.config import NodewrightConfig
from sandbox import triggers
from sandbox.cluster import AUTOSCALER_GROUP, RBAC_FILE


def test_the_sandbox_identity_is_the_access_entry_group_that_deploy_rbac_binds() -> None:
    assert AUTOSCALER_GROUP == KUBERNETES_GROUP
    bound = {
        subject["name"]
        for doc in yaml.safe_load_all(RBAC_FILE.read_text())
        if doc and doc["kind"].endswith("Binding")
        for subject in doc["subjects"]
    }
    assert bound == {KUBERNETES_GROUP, CLEANUP_GROUP}


def test_functions_and_schedules_are_the_stacks() -> None:
    stack = {s.name: (s.memory_mb, int(s.timeout.to_seconds())) for s in FUNCTION_SPECS}
    stack[wakeup.WEBHOOK] = (wakeup.WEBHOOK_MEMORY_MB, int(wakeup.WEBHOOK_TIMEOUT.to_seconds()))
    stack[removal.CLEANUP] = (removal.CLEANUP_MEMORY_MB, int(removal.CLEANUP_TIMEOUT.to_seconds()))
    assert {n: (s.memory_mb, s.timeout_seconds) for n, s in triggers.FUNCTIONS.items()} == stack
    assert {n: int(d.to_seconds()) for n, d in schedules.SCHEDULES.items()} == triggers.SCHEDULES


def test_the_wakeup_alias_settings_are_the_stacks() -> None:
    assert int(wakeup.WAKEUP_MAX_EVENT_AGE.to_seconds()) == triggers.WAKEUP_MAX_EVENT_AGE_SECONDS
    assert triggers.WAKEUP_RETRY_ATTEMPTS == 0
    assert triggers.WEBHOOK_CONCURRENCY == wakeup.WEBHOOK_CONCURRENCY


def _eventbridge(pattern: dict) -> dict:
    """The CDK EventPattern keyword form (detail_type) in EventBridge's own JSON (detail-type)."""
    return {key.replace("_", "-"): value for key, value in pattern.items()}


def test_rules_and_queue_settings_are_the_stacks() -> None:
    assert {k: _eventbridge(v) for k, v in interruption_queue.QUEUE_RULES.items()} == triggers.QUEUE_RULES
    assert _eventbridge(interruption_queue.DIRECT_SPOT_PATTERN) == triggers.DIRECT_RULE
    assert int(interruption_queue.VISIBILITY_TIMEOUT.to_seconds()) == triggers.QUEUE_VISIBILITY_SECONDS
    assert int(interruption_queue.MESSAGE_RETENTION.to_seconds()) == triggers.QUEUE_RETENTION_SECONDS
    assert triggers.QUEUE_MAX_RECEIVE_COUNT == interruption_queue.MAX_RECEIVE_COUNT
    assert triggers.INTERRUPTION_MAX_CONCURRENCY == functions.INTERRUPTION_MAX_CONCURRENCY
    assert triggers.SPOT_EVENTS_CONCURRENCY == functions.SPOT_EVENTS_CONCURRENCY
    reserved = {s.name: s.reserved_concurrency for s in FUNCTION_SPECS}
    assert reserved["spot_events"] == triggers.SPOT_EVENTS_CONCURRENCY


def test_the_interruption_functions_request_rate_is_the_stacks() -> None:
    config = NodewrightConfig(cluster_name="c")
    for name in triggers.FUNCTIONS:
        expected = functions.kube_client_environment(config, name)
        qps, burst = triggers.KUBE_CLIENT_RATE.get(name, (config.kube_client_qps, config.kube_client_burst))
        assert expected == {"KUBE_CLIENT_QPS": f"{qps:g}", "KUBE_CLIENT_BURST": str(burst)}, name
