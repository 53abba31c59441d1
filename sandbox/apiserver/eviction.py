"""The pods/binding and pods/eviction subresources.

Eviction follows pkg/registry/core/pod/storage/eviction.go: pods that are not running (Pending,
Succeeded, Failed) or already terminating are deleted whatever the budgets say; otherwise the single
PodDisruptionBudget that selects the pod must have been processed (observedGeneration) and allow a
disruption, which the eviction consumes (disruptionsAllowed - 1, disruptedPods += pod); a blocked eviction
is a 429 with the API server's own message and a ``DisruptionBudget`` cause (a budget whose status is not
written for its generation: "still being processed", retry after 10 s). Two budgets: kube-apiserver
returns a bare ``Status`` as the eviction's result rather than an error, so the answer is a 500 with the
message and no ``reason`` and no ``details``.
"""

from __future__ import annotations

import copy
from typing import Any

from . import admission, errors
from .errors import ApiError
from .handlers import Context, ResourceHandlers, Response, Target, decode_body, success_status
from .resources import ResourceType
from .selectors import match_selector_object

PDB_KEY = ("policy", "poddisruptionbudgets")
TWO_BUDGETS = (
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
)
BLOCKED = "Cannot evict pod as it would violate the pod's disruption budget."
MAX_DISRUPTED_PODS = 2000


def _condition(obj: dict[str, Any], ctype: str, status: str, reason: str = "", message: str = "") -> None:
    """Set a pod condition, keeping lastTransitionTime when the status does not change."""
    conditions = obj.setdefault("status", {}).setdefault("conditions", [])
    stamp = admission.now()
    for cond in conditions:
        if cond.get("type") == ctype:
            if cond.get("status") != status:
                cond["lastTransitionTime"] = stamp
            cond["status"] = status
            cond["reason"] = reason or cond.get("reason")
            if message:
                cond["message"] = message
            return
    new = {"type": ctype, "status": status, "lastProbeTime": None, "lastTransitionTime": stamp}
    if reason:
        new["reason"] = reason
    if message:
        new["message"] = message
    conditions.append(new)


def bind(handlers: ResourceHandlers, t: Target, ctx: Context, pod_name: str | None = None) -> Response:
    """POST pods/<name>/binding (or /bindings): set spec.nodeName once; a second binding is 409."""
    body = decode_body(ctx.request)
    if not isinstance(body, dict):
        raise errors.bad_request("the body of a binding must be a Binding object")
    body_name = (body.get("metadata") or {}).get("name") or ""
    handlers.admit_to_namespace(t.rt, t.namespace or "", pod_name or body_name)
    if pod_name and body_name and body_name != pod_name:
        # pkg/registry/core/pod/storage: BindingREST.Create
        raise errors.bad_request("name in URL does not match name in Binding object")
    name = pod_name or body_name
    target = body.get("target") or {}
    node = target.get("name")
    if not node:
        raise errors.invalid("Binding", "", name, [errors.FieldError.required("target.name")])
    pods = t.rt
    store = handlers.store
    with store.lock:
        pod = store.get(pods.key, t.namespace or "", name)
        if pod is None:
            raise errors.not_found("pods", "", name)
        meta = pod["metadata"]
        uid = (body.get("metadata") or {}).get("uid")
        if uid and uid != meta.get("uid"):
            raise errors.conflict(
                "pods/binding",
                "",
                name,
                f"Precondition failed: UID in precondition: {uid}, UID in object meta: {meta.get('uid')}",
            )
        if meta.get("deletionTimestamp"):
            raise errors.conflict(
                "pods/binding", "", name, f"pod {name} is being deleted, cannot be assigned to a host"
            )
        current = (pod.get("spec") or {}).get("nodeName")
        if current:
            raise errors.conflict(
                "pods/binding", "", name, f'pod {name} is already assigned to node "{current}"'
            )
        pod["spec"]["nodeName"] = node
        for key, value in ((body.get("metadata") or {}).get("annotations") or {}).items():
            meta.setdefault("annotations", {})[key] = value
        _condition(pod, "PodScheduled", "True")
        if not ctx.dry_run:
            store.write(pods.key, pod)
    return Response(201, success_status(201))


def evict(handlers: ResourceHandlers, t: Target, ctx: Context) -> Response:
    body = decode_body(ctx.request)
    if not isinstance(body, dict):
        raise errors.bad_request("the body of an eviction must be an Eviction object")
    name = t.name or ""
    handlers.admit_to_namespace(t.rt, t.namespace or "", name)
    body_name = (body.get("metadata") or {}).get("name")
    if body_name and body_name != name:
        raise errors.bad_request("name in URL does not match name in Eviction object")
    options = copy.deepcopy(body.get("deleteOptions") or {})
    if (options.get("dryRun") or []) == ["All"]:
        ctx.dry_run = True
    store = handlers.store
    pods: ResourceType = t.rt
    namespace = t.namespace or ""
    with store.lock:
        pod = store.get(pods.key, namespace, name)
        if pod is None:
            raise errors.not_found("pods", "", name)
        phase = (pod.get("status") or {}).get("phase")
        if pod["metadata"].get("deletionTimestamp") or phase in ("Pending", "Succeeded", "Failed"):
            # Not running: no budget to honour (PDBs only protect running pods).
            _mark_and_delete(handlers, pods, pod, options, ctx.dry_run)
            return Response(201, success_status(201))
        budgets = [
            pdb
            for pdb in store.list(PDB_KEY, namespace)[0]
            if match_selector_object((pdb.get("spec") or {}).get("selector"), pod["metadata"].get("labels"))
        ]
        if len(budgets) > 1:
            raise ApiError(500, "", TWO_BUDGETS)
        if budgets:
            pdb = copy.deepcopy(budgets[0])
            if _healthy(pod) or not _unhealthy_may_go(pdb):
                _consume(handlers, pdb, name, ctx.dry_run)
        _mark_and_delete(handlers, pods, pod, options, ctx.dry_run)
    return Response(201, success_status(201))


def _mark_and_delete(
    handlers: ResourceHandlers,
    pods: ResourceType,
    pod: dict[str, Any],
    options: dict[str, Any],
    dry_run: bool,
) -> None:
    """addConditionAndDeletePod: the preconditions checked against the stored pod (a 409 naming the
    resource ``Pod``, before anything is written), DisruptionTarget=True (unless terminal), then an
    ordinary pod delete. A dry run skips the condition, and the delete checks the preconditions."""
    if not dry_run:
        _check_preconditions(pod, options.get("preconditions") or {})
    if (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
        _condition(pod, "DisruptionTarget", "True", "EvictionByEvictionAPI", "Eviction API: evicting")
        if not dry_run:
            pod = handlers.store.write(pods.key, pod)
    handlers.delete_locked(pods, pod, options, dry_run)


def _check_preconditions(pod: dict[str, Any], pre: dict[str, Any]) -> None:
    meta = pod["metadata"]
    if pre.get("uid") and pre["uid"] != meta.get("uid"):
        raise errors.conflict(
            "Pod",
            "",
            meta["name"],
            f"the UID in the precondition ({pre['uid']}) does not match the UID in record "
            f"({meta.get('uid')}). The object might have been deleted and then recreated",
        )
    if pre.get("resourceVersion") and pre["resourceVersion"] != meta.get("resourceVersion"):
        raise errors.conflict(
            "Pod",
            "",
            meta["name"],
            f"the ResourceVersion in the precondition ({pre['resourceVersion']}) does not match the "
            f"ResourceVersion in record ({meta.get('resourceVersion')}). The object might have been modified",
        )


def _healthy(pod: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _unhealthy_may_go(pdb: dict[str, Any]) -> bool:
    """An unready pod may go without consuming the budget under AlwaysAllow, or IfHealthyBudget when met."""
    policy = (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy") or "IfHealthyBudget"
    status = pdb.get("status") or {}
    if policy == "AlwaysAllow":
        return True
    desired = status.get("desiredHealthy", 0)
    return status.get("currentHealthy", 0) >= desired > 0


def _consume(handlers: ResourceHandlers, pdb: dict[str, Any], pod_name: str, dry_run: bool) -> None:
    meta = pdb["metadata"]
    status = pdb.setdefault("status", {})
    if int(status.get("observedGeneration") or 0) < int(meta.get("generation") or 0):
        raise errors.too_many_requests(
            BLOCKED,
            10,
            [
                {
                    "reason": "DisruptionBudget",
                    "message": f"The disruption budget {meta['name']} is still being processed by the "
                    "server.",
                }
            ],
        )
    allowed = int(status.get("disruptionsAllowed") or 0)
    if allowed < 0:
        raise errors.forbidden(
            "poddisruptionbudget", "policy", meta["name"], "pdb disruptions allowed is negative"
        )
    if len(status.get("disruptedPods") or {}) > MAX_DISRUPTED_PODS:
        raise errors.forbidden(
            "poddisruptionbudget",
            "policy",
            meta["name"],
            "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
        )
    if allowed == 0:
        raise errors.too_many_requests(
            BLOCKED,
            0,
            [
                {
                    "reason": "DisruptionBudget",
                    "message": f"The disruption budget {meta['name']} needs "
                    f"{status.get('desiredHealthy', 0)} healthy "
                    f"pods and has {status.get('currentHealthy', 0)} currently",
                }
            ],
        )
    status["disruptionsAllowed"] = allowed - 1
    if allowed - 1 == 0:
        _pdb_condition(status)
    status.setdefault("disruptedPods", {})[pod_name] = admission.now()
    if not dry_run:
        handlers.store.write(PDB_KEY, pdb)


def _pdb_condition(status: dict[str, Any]) -> None:
    conditions = status.setdefault("conditions", [])
    for cond in conditions:
        if cond.get("type") == "DisruptionAllowed":
            if cond.get("status") != "False":
                cond["lastTransitionTime"] = admission.now()
            cond.update({"status": "False", "reason": "InsufficientPods", "message": ""})
            cond.setdefault("observedGeneration", status.get("observedGeneration", 0))
            return
    conditions.append(
        {
            "type": "DisruptionAllowed",
            "status": "False",
            "reason": "InsufficientPods",
            "message": "",
            "lastTransitionTime": admission.now(),
            "observedGeneration": status.get("observedGeneration", 0),
        }
    )
