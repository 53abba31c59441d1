"""The metric contract (infra/metrics.py) matches what the code emits, names and dimension sets.

Names: every literal metric name in the layer and the functions (``add_metric(name=...)``,
``emit_metric(name=...)`` and the flows' ``_count("...")``/``_timing("...")`` helpers).
Dimensions: the real emitters run and their EMF output is read back, because CloudWatch
matches a query on the exact dimension set (Powertools adds ``service`` to every metric).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from infra_synth import Synth

from infra import metrics
from sandbox.shared_data import REPO_ROOT

# add_metric(name="X"), emit_metric(name="X"), emit_counts(name="X"), and the flows' helpers
# _count("X") / _count(ctx, "X").
EMITS = re.compile(
    r'(?:add_metric|emit_metric|emit_counts)\(\s*name="(\w+)"|\b_(?:count|timing)\(\s*(?:ctx,\s*)?"(\w+)"'
)
SERVICE = "nodewright-demo"


def emitted_names() -> set[str]:
    sources = [*(REPO_ROOT / "layers" / "nodewright" / "nodewright").rglob("*.py")]
    sources += (REPO_ROOT / "functions").rglob("*.py")
    names = set()
    for path in sources:
        if "cli" in path.parts:  # the CLI prints, it does not emit
            continue
        for match in EMITS.finditer(path.read_text()):
            names.add(match[1] or match[2])
    return names


def test_contract_lists_exactly_the_metrics_the_code_emits() -> None:
    emitted = emitted_names()
    assert emitted, "no metric found: did the layer move?"
    declared = {spec.name for spec in metrics.EMITTED}
    assert emitted - declared == set(), "emitted but not in infra/metrics.py (not on the dashboard)"
    assert declared - emitted == set(), "declared as emitted, but no code emits it (an empty graph)"
    # Every declared metric has an emitter today (a PLACEHOLDER one would be listed here).
    assert metrics.NOT_EMITTED == ()


def _emf_documents(text: str) -> dict[str, set[str]]:
    """Metric name → its dimension set, from EMF lines printed by Powertools."""
    found: dict[str, set[str]] = {}
    for line in text.splitlines():
        if not line.startswith('{"_aws"'):
            continue
        document = json.loads(line)
        for directive in document["_aws"]["CloudWatchMetrics"]:
            (dimensions,) = directive["Dimensions"]
            for metric in directive["Metrics"]:
                found[metric["Name"]] = set(dimensions)
    return found


@pytest.fixture
def emf(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Any:
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", SERVICE)
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", metrics.NAMESPACE)

    def read() -> dict[str, set[str]]:
        return _emf_documents(capsys.readouterr().out)

    return read


def test_the_provisioner_emits_the_declared_dimension_sets(emf: Any) -> None:
    from types import SimpleNamespace

    from aws_lambda_powertools import Metrics
    from nodewright.provisioning.flow import PassReport, publish_metrics
    from nodewright.provisioning.launch import Launched, LaunchFailure

    emitter = Metrics(namespace=metrics.NAMESPACE)
    report = PassReport(
        pending_pods=3,
        oldest_pending_seconds=42.0,
        plan_seconds=0.2,
        cost_per_hour=1.5,
        launched=[Launched("a", "default", "i-1", "m5.large", "us-east-1a", "spot", 0.03)],
        failures=[LaunchFailure("b", "default", "InsufficientInstanceCapacity", "no capacity")],
    )
    publish_metrics(SimpleNamespace(metrics=emitter), report)
    emitter.flush_metrics()
    seen = emf()
    for spec in (
        metrics.PENDING_PODS,
        metrics.OLDEST_PENDING_POD_AGE,
        metrics.CLUSTER_COST,
        metrics.PLAN_SECONDS,
        metrics.NODECLAIMS_LAUNCHED,
        metrics.LAUNCH_ERRORS,
        metrics.LAUNCH_FAILURES,
    ):
        assert seen[spec.name] == {*spec.dimensions, "service"}, spec.name


def test_the_interruption_path_emits_the_declared_dimension_sets(emf: Any) -> None:
    from nodewright import observability
    from nodewright.interruption.processing import InterruptionProcessor

    processor = object.__new__(InterruptionProcessor)  # _count/_timing use no instance state
    processor._count("InterruptionsHandled", kind="SpotInterruption")
    processor._count("MalformedMessages")
    processor._timing("InterruptionHandlingSeconds", 1.5)
    observability.metrics().flush_metrics()
    seen = emf()
    for spec in (
        metrics.INTERRUPTIONS_HANDLED,
        metrics.MALFORMED_MESSAGES,
        metrics.INTERRUPTION_HANDLING_SECONDS,
    ):
        assert seen[spec.name] - {"service"} == set(spec.dimensions), spec.name
    assert seen[metrics.INTERRUPTIONS_HANDLED.name] == {"Kind", "service"}


def test_the_disruption_flow_emits_the_declared_dimension_sets(emf: Any) -> None:
    from types import SimpleNamespace

    from aws_lambda_powertools import Metrics
    from nodewright.disruption.flow import Disrupted, DisruptionReport, _count, publish_metrics

    emitter = Metrics(namespace=metrics.NAMESPACE)
    report = DisruptionReport(
        disrupted=[
            Disrupted(
                nodeclaim=f"c{i}", node=f"n{i}", nodepool="default", reason=reason, price_per_hour=price
            )
            for i, (reason, price) in enumerate([("Empty", 0.05), ("Expired", 0.05), ("Empty", None)])
        ]
    )
    publish_metrics(SimpleNamespace(metrics=emitter), report)
    for spec in (metrics.CONSOLIDATION_CANDIDATES, metrics.DISRUPTION_BLOCKED):  # as _choose counts
        _count(SimpleNamespace(metrics=emitter), spec.name, 2)  # type: ignore[arg-type]
    emitter.flush_metrics()
    seen = emf()
    for spec in (
        metrics.DISRUPTION_ACTIONS,
        metrics.DISRUPTION_SAVINGS,
        metrics.CONSOLIDATION_CANDIDATES,
        metrics.DISRUPTION_BLOCKED,
    ):
        assert seen[spec.name] == {*spec.dimensions, "service"}, spec.name


@pytest.mark.parametrize(
    ("function", "flow"), [("provisioner", "provisioning"), ("disruption", "disruption")]
)
def test_scheduled_handlers_emit_the_heartbeat_after_every_completed_invocation_idle_or_not(
    emf: Any, monkeypatch: pytest.MonkeyPatch, function: str, flow: str
) -> None:
    """The real handler, with its flow's ``run`` stubbed: one PassesCompleted {Function, service}
    when the passes return (an idle one too), none when they raise or the API server is
    unreachable (which the handler reports and returns: the heartbeat alarm is what sees it)."""
    import importlib
    from types import SimpleNamespace

    from sandbox.runtime.events import scheduled_event
    from sandbox.runtime.lambdas import LambdaContext, load_function

    module = load_function(function)
    monkeypatch.setattr(module.container, "get", SimpleNamespace)  # no AWS, no cluster
    idle = SimpleNamespace(summary=lambda: {"passes": 1}, stale_wakeup=False)
    if function == "disruption":  # its other controllers, after the flow: nothing to do either
        for controller in ("status", "capacityreservation"):
            found = importlib.util.find_spec(f"nodewright.{controller}")
            if found is not None:
                monkeypatch.setattr(
                    importlib.import_module(f"nodewright.{controller}"), "reconcile", lambda ctx: idle
                )
    layer_flow = importlib.import_module(f"nodewright.{flow}")
    monkeypatch.setattr(layer_flow, "run", lambda ctx, seconds, **_: idle)
    module.handler(scheduled_event(), LambdaContext(55, function_name=f"nodewright-{function}"))
    out = emf()
    assert out[metrics.PASSES_COMPLETED.name] == {*metrics.PASSES_COMPLETED.dimensions, "service"}

    def broken(ctx: Any, seconds: float, **_: Any) -> Any:
        raise RuntimeError("API server unreachable")

    monkeypatch.setattr(layer_flow, "run", broken)
    with pytest.raises(RuntimeError):
        module.handler(scheduled_event(), LambdaContext(55, function_name=f"nodewright-{function}"))
    assert metrics.PASSES_COMPLETED.name not in emf()

    def unreachable(ctx: Any, seconds: float, **_: Any) -> Any:
        from nodewright.cluster.errors import ApiUnavailable

        raise ApiUnavailable("GET /api/v1/nodes: API server unreachable")

    monkeypatch.setattr(layer_flow, "run", unreachable)  # reported and returned, but no pass completed
    module.handler(scheduled_event(), LambdaContext(55, function_name=f"nodewright-{function}"))
    assert metrics.PASSES_COMPLETED.name not in emf()


def test_launch_failure_classes_are_the_cloud_layers() -> None:
    from nodewright.cloud import errors

    assert metrics.LAUNCH_FAILURE_CLASSES == errors.LAUNCH_FAILURE_CLASSES
    for name in ("INSUFFICIENT_CAPACITY", "QUOTA", "PERMISSION", "INVALID_REQUEST", "OTHER"):
        assert getattr(metrics, name) == getattr(errors, name)


def test_capacity_types_are_the_ones_the_provider_reports() -> None:
    from nodewright.cloud.catalog import ON_DEMAND, SPOT

    assert set(metrics.CAPACITY_TYPES) == {SPOT, ON_DEMAND}


def _dashboard(synth: Synth) -> dict[str, Any]:
    _, resource = synth.one("AWS::CloudWatch::Dashboard")
    parts = resource["Properties"]["DashboardBody"]["Fn::Join"][1]
    return json.loads("".join(p if isinstance(p, str) else "REF" for p in parts))


def test_dashboard_queries_match_the_emitted_dimension_sets(default_synth: Synth) -> None:
    by_name = {spec.name: spec for spec in metrics.ALL_METRICS}
    graphed = set()
    for widget in _dashboard(default_synth)["widgets"]:
        props = widget["properties"]
        for line in props.get("metrics", []):
            if isinstance(line[0], dict):  # an expression: SEARCH over the exact schema, or math
                expression = line[0]["expression"]
                for schema, name in re.findall(r"SEARCH\('(\{[^}]+\}) MetricName=\"(\w+)\"", expression):
                    assert schema == by_name[name].schema, (name, schema)
                    assert f'service="{SERVICE}"' in expression
                    graphed.add(name)
                continue
            namespace, name, *dims = [p for p in line if not isinstance(p, dict)]
            if namespace != metrics.NAMESPACE:
                continue
            dimension_names = set(dims[0::2])
            assert dimension_names == {*by_name[name].dimensions, "service"}, (name, dims)
            assert dict(zip(dims[0::2], dims[1::2], strict=True))["service"] == SERVICE
            graphed.add(name)
    assert graphed == metrics.METRIC_NAMES, f"not on the dashboard: {metrics.METRIC_NAMES - graphed}"


def test_placeholder_metrics_are_on_a_panel_labelled_placeholder(default_synth: Synth) -> None:
    for widget in _dashboard(default_synth)["widgets"]:
        props = widget["properties"]
        names = {p for line in props.get("metrics", []) for p in line if isinstance(p, str)}
        if names & {spec.name for spec in metrics.NOT_EMITTED}:
            assert props["title"].startswith("PLACEHOLDER:"), props["title"]


def test_alarms_query_exactly_the_emitted_dimension_sets(default_synth: Synth) -> None:
    by_name = {spec.name: spec for spec in metrics.ALL_METRICS}
    alarm_metrics = []
    for alarm in default_synth.resources("AWS::CloudWatch::Alarm").values():
        props = alarm["Properties"]
        if props.get("Namespace") == metrics.NAMESPACE:
            alarm_metrics.append((props["MetricName"], props["Dimensions"]))
        for query in props.get("Metrics", []):
            metric = (query.get("MetricStat") or {}).get("Metric") or {}
            if metric.get("Namespace") == metrics.NAMESPACE:  # not AWS's own (e.g. AWS/SQS)
                alarm_metrics.append((metric["MetricName"], metric["Dimensions"]))
    assert alarm_metrics
    for name, dimensions in alarm_metrics:
        assert by_name[name].emitted_by, f"alarm on {name}, which no flow emits"
        assert {d["Name"] for d in dimensions} == {*by_name[name].dimensions, "service"}, name


def test_the_webhook_emits_the_declared_dimension_sets(emf: Any) -> None:
    import json
    import logging
    from datetime import UTC, datetime

    from aws_lambda_powertools import Metrics
    from fakes import FakeClock
    from nodewright.wakeup.webhook import PathSecrets, Webhook

    emitter = Metrics(namespace=metrics.NAMESPACE)
    now = datetime(2026, 12, 5, tzinfo=UTC)
    reads = iter([PathSecrets("x" * 48, previous="y" * 48, current_since=now)])

    def secrets() -> PathSecrets:
        return next(reads)  # then StopIteration: the reread fails and the last secrets are kept

    clock = FakeClock(now)
    webhook = Webhook(
        secrets=secrets,
        wake=lambda event: None,
        logger=logging.getLogger("t"),
        metrics=emitter,
        clock=clock,
    )
    failed_scheduling = {  # what the wake-up's configuration sends: kube-scheduler's Event
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "web-1.17a", "namespace": "default"},
        "reportingController": "default-scheduler",
        "reason": "FailedScheduling",
        "regarding": {"kind": "Pod", "namespace": "default", "name": "web-1", "apiVersion": "v1"},
        "type": "Warning",
    }
    review = json.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "u",
                "operation": "CREATE",
                "resource": {"group": "events.k8s.io", "version": "v1", "resource": "events"},
                "object": failed_scheduling,
            },
        }
    )
    webhook.serve("POST", "/" + "x" * 48 + "/admit", review)
    webhook.serve("POST", "/" + "x" * 48 + "/admit", review)
    webhook.serve("POST", "/" + "y" * 48 + "/admit", review)  # the path the rotation replaced
    clock.mono += 3600.0
    webhook.serve("POST", "/guess/admit", "{}")  # a miss rereads the secret: it fails
    emitter.flush_metrics()
    seen = emf()
    for spec in (
        metrics.WAKEUPS,
        metrics.WAKEUPS_COALESCED,
        metrics.WEBHOOK_REFUSED,
        metrics.PREVIOUS_SECRET_REQUESTS,
        metrics.WEBHOOK_SECRET_ERRORS,
    ):
        assert seen[spec.name] == {*spec.dimensions, "service"}, spec.name


def test_the_provisioner_counts_handled_and_stale_wakeups_with_the_service_only(
    emf: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from datetime import UTC, datetime
    from types import SimpleNamespace

    from aws_lambda_powertools import Metrics
    from nodewright import observability, provisioning
    from nodewright.wakeup.events import wakeup_event

    from sandbox.runtime.lambdas import LambdaContext, load_function

    # The container's Metrics reads POWERTOOLS_SERVICE_NAME when built, as in Lambda; the cached
    # one of this test process may predate the fixture's variable.
    monkeypatch.setattr(observability, "metrics", lambda: Metrics(namespace=metrics.NAMESPACE))
    module = load_function("provisioner")
    monkeypatch.setattr(module.container, "get", SimpleNamespace)
    for stale in (False, True):
        report = SimpleNamespace(summary=lambda: {"passes": 1}, stale_wakeup=stale)
        monkeypatch.setattr(provisioning, "run", lambda ctx, seconds, woken_at, r=report: r)
        module.handler(wakeup_event(datetime.now(UTC)), LambdaContext(55))
    seen = emf()
    for spec in (metrics.WAKEUPS_HANDLED, metrics.WAKEUPS_STALE):
        assert seen[spec.name] == {*spec.dimensions, "service"}, spec.name
