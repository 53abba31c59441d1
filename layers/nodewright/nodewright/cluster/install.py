"""What an operator installs once (``nodewright install-webhooks``), and what takes it out again.

``apply`` and ``remove`` run with the operator's own credentials: the functions' RBAC cannot write
these objects, on purpose. ``uninstall_webhooks`` is the one exception, run by the removal at ``cdk
destroy`` (``nodewright.removal``) under its own group, whose ClusterRole (deploy/rbac.yaml,
``nodewright-cleanup``) may only delete the wake-up's configuration and patch the two converted
CRDs, each by name: it takes the stack's URL out of the cluster, and can put nothing in.
"""

from __future__ import annotations

from typing import Any

from nodewright.api import webhooks
from nodewright.cluster.client import Cluster
from nodewright.cluster.errors import NotFound
from nodewright.cluster.resources import CRDS, VALIDATING_WEBHOOKS, Resource

# Every ValidatingWebhookConfiguration ``install-webhooks`` applies (deploy/rbac.yaml names the same
# ones in the cleanup's ``resourceNames``; tests/infra/test_infra_rbac.py holds them equal).
WEBHOOK_CONFIGURATIONS = (webhooks.CONFIGURATION_NAME,)
V1 = "v1"


def apply(cluster: Cluster, resource: Resource, document: dict[str, Any]) -> str:
    """Create ``document``, or replace the object of that name (its whole spec): "created" or
    "configured", as ``kubectl apply`` says."""
    meta = document["metadata"]
    current = cluster.find(resource, meta["name"], meta.get("namespace"))
    if current is None:
        cluster.create(resource, document)
        return "created"
    body = {
        **document,
        "metadata": {**meta, "resourceVersion": current["metadata"]["resourceVersion"]},
    }
    cluster.replace(resource, {"apiVersion": resource.api_version, "kind": resource.kind, **body})
    return "configured"


def remove(cluster: Cluster, resource: Resource, name: str) -> bool:
    """Delete the named object; False when there was none."""
    return cluster.delete(resource, name) is not None


def uninstall_webhooks(cluster: Cluster) -> list[str]:
    """Take out everything that names the stack's function URL: delete the wake-up's
    ValidatingWebhookConfiguration, and put the converted CRDs back to serving ``v1`` only with no
    conversion webhook (``api.webhooks.without_conversion``, the shipped form). Idempotent; one
    line per object saying what was done, as ``kubectl`` says it.

    The CRDs are patched, not replaced: their ``v1`` version stays as the cluster has it, and no
    stored object is touched (``v1`` is, and stays, the storage version, so reading it never needed
    the webhook). A version still listed in ``status.storedVersions`` (objects a migration left in
    it) cannot leave ``spec.versions``, so it stays, with ``served: false``: requests for it then
    get a 404 from the API server instead of a conversion-webhook failure that carries the URL.
    """
    done = []
    for name in WEBHOOK_CONFIGURATIONS:
        gone = remove(cluster, VALIDATING_WEBHOOKS, name)
        done.append(f"validatingwebhookconfiguration/{name} {'deleted' if gone else 'not found'}")
    for name in webhooks.CONVERTED_CRDS:
        try:
            cluster.update_with_retry(CRDS, name, serving_v1_only)
        except NotFound:
            done.append(f"customresourcedefinition/{name} not installed")
            continue
        done.append(f"customresourcedefinition/{name} serves v1 only, no conversion webhook")
    return done


def serving_v1_only(crd: dict[str, Any]) -> dict[str, Any] | None:
    """The merge patch that makes ``crd`` serve ``v1`` only without a webhook, or None when it
    already does (see ``uninstall_webhooks``)."""
    target = webhooks.without_conversion(crd)
    stored = set((crd.get("status") or {}).get("storedVersions") or ())
    versions = list(target["spec"]["versions"])
    for version in crd["spec"].get("versions") or []:
        if version["name"] != V1 and version["name"] in stored:
            versions.append({**version, "served": False, "storage": False})
    conversion = {"strategy": "None"}
    if crd["spec"].get("versions") == versions and crd["spec"].get("conversion") == conversion:
        return None
    # null removes the webhook: kube-apiserver refuses one with strategy None.
    return {"spec": {"versions": versions, "conversion": {**conversion, "webhook": None}}}
