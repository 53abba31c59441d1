"""What a listed pod keeps (``cluster.client._slim_pod``): the volumes a flow reads, not the
service-account token's projected volume kube-apiserver adds to every pod."""

from __future__ import annotations

from typing import Any

from nodewright.cluster.client import _slim_pod
from nodewright.scheduling import model
from nodewright.state.pods import claim_names

TOKEN_VOLUME = {
    "name": "kube-api-access-x7k2p",
    "projected": {
        "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        ],
        "defaultMode": 420,
    },
}


def pod(volumes: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "metadata": {"name": "db-0", "namespace": "data"},
        "spec": {
            "containers": [{"name": "db", "resources": {"requests": {"cpu": "1"}}}],
            "volumes": volumes,
        },
        "status": {"phase": "Running"},
    }


def test_a_listed_pod_keeps_its_claims_and_drops_the_token_and_config_volumes() -> None:
    listed = pod(
        [
            TOKEN_VOLUME,
            {"name": "config", "configMap": {"name": "db-config"}},
            {"name": "data", "persistentVolumeClaim": {"claimName": "data-db-0"}},
            {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
            {"name": "tmp", "emptyDir": {}},
        ]
    )
    whole = pod(listed["spec"]["volumes"])

    _slim_pod(listed)

    assert [v["name"] for v in listed["spec"]["volumes"]] == ["data", "scratch"]
    assert model.pod_from_k8s(listed).spec.claims == model.pod_from_k8s(whole).spec.claims == ("data-db-0",)
    assert claim_names(listed) == claim_names(whole) == ["data-db-0", "db-0-scratch"]
