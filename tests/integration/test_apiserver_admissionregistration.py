"""admissionregistration.k8s.io/v1 as kube-apiserver serves it: MutatingWebhookConfigurations,
ValidatingAdmissionPolicies and their bindings next to ValidatingWebhookConfigurations, through
discovery, kubectl (apply, get tables, explain) and the kubernetes client, with the scheme's
defaults and the API's validation."""

from __future__ import annotations

import json
import shutil
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from nodewright.cluster import Cluster, Invalid, auth
from nodewright.cluster import readiness as k8s

from sandbox.apiserver import ApiServer
from sandbox.apiserver.testing import KUBECTL, kubectl

pytestmark = pytest.mark.timeout(120)
needs_kubectl = pytest.mark.skipif(
    not shutil.which(KUBECTL), reason="kubectl is not installed (make installs Debian's kubernetes-client)"
)
GROUP = "/apis/admissionregistration.k8s.io/v1"

MUTATING = textwrap.dedent(
    """
    apiVersion: admissionregistration.k8s.io/v1
    kind: MutatingWebhookConfiguration
    metadata:
      name: karpenter-defaulting
    webhooks:
    - name: defaulting.webhook.karpenter.sh
      admissionReviewVersions: [v1]
      sideEffects: None
      clientConfig:
        service: {name: karpenter, namespace: kube-system}
      rules:
      - apiGroups: [karpenter.sh]
        apiVersions: [v1]
        operations: [CREATE, UPDATE]
        resources: [nodepools]
    """
)
POLICY = textwrap.dedent(
    """
    apiVersion: admissionregistration.k8s.io/v1
    kind: ValidatingAdmissionPolicy
    metadata:
      name: replica-limit
    spec:
      matchConstraints:
        resourceRules:
        - apiGroups: [apps]
          apiVersions: [v1]
          operations: [CREATE, UPDATE]
          resources: [deployments]
      validations:
      - expression: object.spec.replicas <= 5
        message: at most 5 replicas
    """
)
BINDING = textwrap.dedent(
    """
    apiVersion: admissionregistration.k8s.io/v1
    kind: ValidatingAdmissionPolicyBinding
    metadata:
      name: replica-limit-everywhere
    spec:
      policyName: replica-limit
      validationActions: [Deny]
    """
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ApiServer, Path]]:
    with ApiServer() as srv:
        yield srv, srv.write_kubeconfig(tmp_path_factory.mktemp("admission") / "config")


@pytest.fixture
def api(server: tuple[ApiServer, Path]) -> Iterator[client.AdmissionregistrationV1Api]:
    api_client = config.new_client_from_config(str(server[1]))
    yield client.AdmissionregistrationV1Api(api_client)
    api_client.close()


@pytest.fixture
def layer(server: tuple[ApiServer, Path]) -> Iterator[Cluster]:
    """The layer's client: it sends what the kubernetes client's models would refuse to send."""
    cluster = Cluster(client.ApiClient(auth.kubeconfig_configuration(str(server[1]))))
    yield cluster
    cluster.api_client.close()


def ok(result: Any) -> str:
    assert result.returncode == 0, f"kubectl failed: {result.stderr}"
    return str(result.stdout)


def test_discovery_lists_the_group_s_four_resources_as_kube_apiserver_does(
    server: tuple[ApiServer, Path],
) -> None:
    api_client = config.new_client_from_config(str(server[1]))
    try:
        resources = client.AdmissionregistrationV1Api(api_client).get_api_resources().resources
    finally:
        api_client.close()
    found = {r.name: r for r in resources}
    for name, kind in (
        ("mutatingwebhookconfigurations", "MutatingWebhookConfiguration"),
        ("validatingwebhookconfigurations", "ValidatingWebhookConfiguration"),
        ("validatingadmissionpolicies", "ValidatingAdmissionPolicy"),
        ("validatingadmissionpolicybindings", "ValidatingAdmissionPolicyBinding"),
    ):
        assert found[name].kind == kind
        assert found[name].namespaced is False
        assert found[name].categories == ["api-extensions"]
        assert set(found[name].verbs) == {
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch",
        }
    assert found["validatingadmissionpolicies/status"].verbs == ["get", "patch", "update"]


@needs_kubectl
def test_kubectl_applies_gets_and_explains_a_mutating_webhook_configuration_with_its_defaults(
    server: tuple[ApiServer, Path],
) -> None:
    _, kubeconfig = server
    ok(kubectl(kubeconfig, "apply", "-f", "-", stdin=MUTATING))
    table = ok(kubectl(kubeconfig, "get", "mutatingwebhookconfigurations"))
    header, row = table.splitlines()[:2]
    assert header.split() == ["NAME", "WEBHOOKS", "AGE"]
    assert row.split()[:2] == ["karpenter-defaulting", "1"]
    stored = json.loads(
        ok(kubectl(kubeconfig, "get", "mutatingwebhookconfiguration", "karpenter-defaulting", "-o", "json"))
    )
    (hook,) = stored["webhooks"]
    # SetDefaults_MutatingWebhook, SetDefaults_Rule and SetDefaults_ServiceReference.
    assert hook["failurePolicy"] == "Fail"
    assert hook["matchPolicy"] == "Equivalent"
    assert hook["namespaceSelector"] == {}
    assert hook["objectSelector"] == {}
    assert hook["timeoutSeconds"] == 10
    assert hook["reinvocationPolicy"] == "Never"
    assert hook["rules"][0]["scope"] == "*"
    assert hook["clientConfig"]["service"]["port"] == 443
    assert stored["metadata"]["generation"] == 1
    explained = ok(kubectl(kubeconfig, "explain", "mutatingwebhookconfiguration.webhooks.reinvocationPolicy"))
    assert "reinvocationPolicy" in explained
    extensions = ok(kubectl(kubeconfig, "get", "api-extensions", "-o", "name"))
    assert "mutatingwebhookconfiguration.admissionregistration.k8s.io/karpenter-defaulting" in extensions
    ok(kubectl(kubeconfig, "delete", "mutatingwebhookconfiguration", "karpenter-defaulting"))


@needs_kubectl
def test_kubectl_applies_a_validating_admission_policy_and_its_binding_and_prints_their_tables(
    server: tuple[ApiServer, Path],
) -> None:
    _, kubeconfig = server
    ok(kubectl(kubeconfig, "apply", "-f", "-", stdin=POLICY + "---\n" + BINDING))
    header, row = ok(kubectl(kubeconfig, "get", "validatingadmissionpolicies")).splitlines()[:2]
    assert header.split() == ["NAME", "VALIDATIONS", "PARAMKIND", "AGE"]
    assert row.split()[:3] == ["replica-limit", "1", "<unset>"]
    header, row = ok(kubectl(kubeconfig, "get", "validatingadmissionpolicybindings")).splitlines()[:2]
    assert header.split() == ["NAME", "POLICYNAME", "PARAMREF", "AGE"]
    assert row.split()[:3] == ["replica-limit-everywhere", "replica-limit", "<unset>"]
    policy = json.loads(
        ok(kubectl(kubeconfig, "get", "validatingadmissionpolicy", "replica-limit", "-o", "json"))
    )
    # SetDefaults_ValidatingAdmissionPolicySpec and SetDefaults_MatchResources.
    assert policy["spec"]["failurePolicy"] == "Fail"
    constraints = policy["spec"]["matchConstraints"]
    assert constraints["matchPolicy"] == "Equivalent"
    assert constraints["namespaceSelector"] == {}
    assert constraints["objectSelector"] == {}
    assert constraints["resourceRules"][0]["scope"] == "*"
    ok(kubectl(kubeconfig, "delete", "validatingadmissionpolicybinding", "replica-limit-everywhere"))
    ok(kubectl(kubeconfig, "delete", "validatingadmissionpolicy", "replica-limit"))


def mutating(**hook: Any) -> dict[str, Any]:
    webhook = {
        "name": "m.example.com",
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "clientConfig": {"url": "https://example.com/mutate"},
        **hook,
    }
    return {"metadata": {"name": "bad"}, "webhooks": [webhook]}


ONE_OF_NONE = 'supported values: "None", "NoneOnDryRun"'
HTTPS_ONLY = "'https' is the only allowed URL scheme; desired format: https://host[/path]"


@pytest.mark.parametrize(
    ("hook", "field", "message"),
    [
        ({"sideEffects": None}, "sideEffects", "Required value: must specify one of None, NoneOnDryRun"),
        ({"sideEffects": "Some"}, "sideEffects", f'Unsupported value: "Some": {ONE_OF_NONE}'),
        (
            {"admissionReviewVersions": []},
            "admissionReviewVersions",
            "Required value: must specify one of v1",
        ),
        (
            {"name": "short"},
            "name",
            'Invalid value: "short": should be a domain with at least three segments separated by dots',
        ),
        ({"timeoutSeconds": 31}, "timeoutSeconds", "Invalid value: 31: the timeout value must be between 1"),
        (
            {"reinvocationPolicy": "Always"},
            "reinvocationPolicy",
            'Unsupported value: "Always": supported values: "IfNeeded", "Never"',
        ),
        ({"clientConfig": {}}, "clientConfig", "Required value: exactly one of url or service is required"),
        (
            {"clientConfig": {"url": "http://example.com/m"}},
            "clientConfig.url",
            f'Invalid value: "http": {HTTPS_ONLY}',
        ),
        (
            {
                "rules": [
                    {"operations": ["PATCH"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}
                ]
            },
            "rules[0].operations[0]",
            'Unsupported value: "PATCH"',
        ),
        (
            {"matchConditions": [{"name": "c", "expression": "object.metadata.name =="}]},
            "matchConditions[0].expression",
            'Invalid value: "object.metadata.name ==": compilation failed: ERROR: <input>:1:22: Syntax error',
        ),
    ],
    ids=[
        "no-side-effects",
        "side-effects-some",
        "no-review-versions",
        "short-name",
        "timeout",
        "reinvocation",
        "no-client",
        "http-url",
        "operation",
        "cel-syntax",
    ],
)
def test_an_invalid_mutating_webhook_configuration_is_refused_with_the_api_s_message(
    layer: Cluster, hook: dict[str, Any], field: str, message: str
) -> None:
    body = mutating(**hook)
    body["webhooks"][0] = {k: v for k, v in body["webhooks"][0].items() if v is not None}
    with pytest.raises(Invalid) as refused:
        layer.request("POST", f"{GROUP}/mutatingwebhookconfigurations", body=body)
    assert refused.value.reason == "Invalid"
    assert f"webhooks[0].{field}: {message}" in refused.value.message, refused.value.message


def test_a_validating_webhook_configuration_is_validated_as_a_mutating_one_is(layer: Cluster) -> None:
    """ValidateValidatingWebhookConfiguration checks the same webhook fields (reinvocationPolicy apart)."""
    body = mutating(name="v.example.com")
    del body["webhooks"][0]["sideEffects"]
    with pytest.raises(Invalid) as refused:
        layer.request("POST", f"{GROUP}/validatingwebhookconfigurations", body=body)
    assert "webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun" in (
        refused.value.message
    )


def test_a_policy_without_validations_and_a_binding_without_actions_are_refused(layer: Cluster) -> None:
    empty = {"metadata": {"name": "empty"}, "spec": {"matchConstraints": {"resourceRules": []}}}
    with pytest.raises(Invalid) as refused:
        layer.request("POST", f"{GROUP}/validatingadmissionpolicies", body=empty)
    message = refused.value.message
    assert "spec.matchConstraints.resourceRules: Required value" in message
    assert (
        "spec.validations: Required value: validations or auditAnnotations must contain at least one item"
        in message
    )
    unbound = {"metadata": {"name": "b"}, "spec": {"policyName": "p"}}
    with pytest.raises(Invalid) as refused:
        layer.request("POST", f"{GROUP}/validatingadmissionpolicybindings", body=unbound)
    assert (
        "spec.validationActions: Required value: at least one validation action is required"
        in refused.value.message
    )


def test_the_client_round_trips_the_mutating_kind_and_the_doctor_reads_both_kinds(
    server: tuple[ApiServer, Path], api: client.AdmissionregistrationV1Api
) -> None:
    created = api.create_mutating_webhook_configuration(mutating())
    assert created.webhooks[0].reinvocation_policy == "Never"
    listed = api.list_mutating_webhook_configuration()
    assert [c.metadata.name for c in listed.items] == ["bad"]
    # Its strategy bumps the generation when the webhooks change, not for metadata.
    relabelled = api.patch_mutating_webhook_configuration("bad", {"metadata": {"labels": {"a": "b"}}})
    assert relabelled.metadata.generation == 1
    retimed = api.patch_mutating_webhook_configuration(
        "bad", [{"op": "replace", "path": "/webhooks/0/timeoutSeconds", "value": 5}]
    )
    assert (retimed.metadata.generation, retimed.webhooks[0].timeout_seconds) == (2, 5)
    cluster = Cluster(client.ApiClient(auth.kubeconfig_configuration(str(server[1]))))
    try:
        found = k8s.webhook_configurations(cluster)
        assert found != k8s.NOT_SERVED
        assert {(c["kind"], c["metadata"]["name"]) for c in found} >= {
            ("MutatingWebhookConfiguration", "bad")
        }
    finally:
        cluster.api_client.close()
        api.delete_mutating_webhook_configuration("bad")
