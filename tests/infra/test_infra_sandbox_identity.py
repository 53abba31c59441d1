"""The sandbox's functions act as the Kubernetes group the stack's EKS access entry maps their role to."""

from __future__ import annotations

import yaml

from infra.capabilities.cluster_access import KUBERNETES_GROUP
from sandbox.cluster import AUTOSCALER_GROUP, RBAC_FILE


def test_the_sandbox_identity_is_the_access_entry_group_that_deploy_rbac_binds() -> None:
    assert AUTOSCALER_GROUP == KUBERNETES_GROUP
    bound = {
        subject["name"]
        for doc in yaml.safe_load_all(RBAC_FILE.read_text())
        if doc and doc["kind"].endswith("Binding")
        for subject in doc["subjects"]
    }
    assert bound == {KUBERNETES_GROUP}
