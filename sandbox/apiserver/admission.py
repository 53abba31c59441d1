"""Server-side defaults, admission plugins and validation of the built-in kinds: the functions
kube-apiserver keeps in ``pkg/apis/<group>/v1/defaults.go``, ``pkg/apis/<group>/validation`` and
``plugin/pkg/admission``; each kind's strategy (strategies/) says which of them it runs.

Clients rely on these: a created Pod comes back with restartPolicy, tolerations and qosClass; a Node
gains the not-ready taint; a Namespace its ``kubernetes.io/metadata.name`` label; a Deployment its
rolling-update strategy. Validation covers what callers get wrong in practice and answers 422.
"""

from __future__ import annotations

import copy
import random
import re
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from kubernetes.utils.quantity import parse_quantity

from . import errors as api_errors
from .errors import FieldError
from .selectors import match_selector_object, valid_label_key, valid_label_value

_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
    "and "
    "end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
_LABEL_KEY_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used "
    "for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
_QUANTITY_MSG = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
TAINT_EFFECTS = ["NoSchedule", "PreferNoSchedule", "NoExecute"]
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"
PRIORITY_CLASSES = {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}


class _ClusterClock:
    """How far the cluster's clocks (this API server, the simulated scheduler and kubelets) are off
    the true time: a fault test's clock skew between the cluster and the functions."""

    skew = timedelta(0)


def set_clock_skew(seconds: float) -> None:
    _ClusterClock.skew = timedelta(seconds=seconds)


def cluster_now() -> datetime:
    """The cluster's time: the true time plus any injected skew."""
    return datetime.now(UTC) + _ClusterClock.skew


def now() -> str:
    """RFC 3339 in UTC with second precision, as metav1.Time serialises."""
    return cluster_now().strftime("%Y-%m-%dT%H:%M:%SZ")


def random_suffix(length: int = 5) -> str:
    """generateName's suffix alphabet (no vowels, no look-alikes), as apimachinery's rand.String."""
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    raw = uuid.uuid4().int
    out = []
    for _ in range(length):
        raw, idx = divmod(raw, len(alphabet))
        out.append(alphabet[idx])
    return "".join(out)


# ---------------------------------------------------------------------------------- defaults


def _image_pull_policy(image: str) -> str:
    if "@" in image:
        return "IfNotPresent"
    last = image.rsplit("/", 1)[-1]
    tag = last.split(":", 1)[1] if ":" in last else ""
    return "Always" if tag in ("", "latest") else "IfNotPresent"


def _default_probe(probe: dict[str, Any] | None) -> None:
    if isinstance(probe, dict):
        probe.setdefault("timeoutSeconds", 1)
        probe.setdefault("periodSeconds", 10)
        probe.setdefault("successThreshold", 1)
        probe.setdefault("failureThreshold", 3)


def _default_container(container: dict[str, Any]) -> None:
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    if isinstance(container.get("image"), str):
        container.setdefault("imagePullPolicy", _image_pull_policy(container["image"]))
    container.setdefault("resources", {})
    for port in container.get("ports") or []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        _default_probe(container.get(probe))


def default_pod_spec(spec: dict[str, Any]) -> None:
    """SetDefaults_PodSpec: what a pod template gets too."""
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("securityContext", {})
    spec.setdefault("enableServiceLinks", True)
    for field in ("containers", "initContainers"):
        for container in spec.get(field) or []:
            if isinstance(container, dict):
                _default_container(container)
    for volume in spec.get("volumes") or []:
        if isinstance(volume, dict) and isinstance(volume.get("hostPath"), dict):
            volume["hostPath"].setdefault("type", "")  # SetDefaults_HostPathVolumeSource: HostPathUnset


def qos_class(spec: dict[str, Any]) -> str:
    """v1qos.GetPodQOS over cpu and memory of every (init) container."""
    requests: dict[str, Any] = {}
    limits: dict[str, Any] = {}
    guaranteed = True
    containers = list(spec.get("containers") or []) + list(spec.get("initContainers") or [])
    for container in containers:
        res = (container or {}).get("resources") or {}
        req = {k: v for k, v in (res.get("requests") or {}).items() if k in ("cpu", "memory")}
        lim = {k: v for k, v in (res.get("limits") or {}).items() if k in ("cpu", "memory")}
        requests.update({k: v for k, v in req.items() if _positive(v)})
        limits.update({k: v for k, v in lim.items() if _positive(v)})
        if set(lim) != {"cpu", "memory"}:
            guaranteed = False
        for k, v in req.items():
            if k in lim and _quantity(v) != _quantity(lim[k]):
                guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def _quantity(value: Any) -> Any:
    try:
        return parse_quantity(value)
    except (ValueError, TypeError):
        return None


def _positive(value: Any) -> bool:
    q = _quantity(value)
    return q is not None and q > 0


def default_pod(pod: dict[str, Any]) -> None:
    spec = pod.setdefault("spec", {})
    default_pod_spec(spec)
    for container in spec.get("containers") or []:
        if not isinstance(container, dict):
            continue
        res = container.setdefault("resources", {})
        limits = res.get("limits") or {}
        if limits:
            requests = res.setdefault("requests", {})
            for name, value in limits.items():
                requests.setdefault(name, value)
    # Admission: Priority and DefaultTolerationSeconds.
    spec.setdefault("priority", PRIORITY_CLASSES.get(spec.get("priorityClassName", ""), 0))
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    tolerations = spec.setdefault("tolerations", [])
    for key in (NOT_READY_TAINT, UNREACHABLE_TAINT):
        if not any(
            isinstance(t, dict)
            and (t.get("key") == key or (not t.get("key") and t.get("operator") == "Exists"))
            and t.get("effect") in (None, "", "NoExecute")
            for t in tolerations
        ):
            tolerations.append(
                {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
            )


def default_namespace(namespace: dict[str, Any]) -> None:
    """SetDefaults_Namespace: the name label every namespace carries."""
    meta = namespace["metadata"]
    meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta["name"]


def default_event(event: dict[str, Any]) -> None:
    """Fields without omitempty in core/v1 Event: always serialised."""
    for name in ("reportingComponent", "reportingInstance"):
        event.setdefault(name, "")
    for name in ("firstTimestamp", "lastTimestamp", "eventTime"):
        event.setdefault(name, None)
    event.setdefault("source", {})


def default_persistent_volume(volume: dict[str, Any]) -> None:
    spec = volume.setdefault("spec", {})
    if isinstance(spec.get("hostPath"), dict):
        spec["hostPath"].setdefault("type", "")
    spec.setdefault("persistentVolumeReclaimPolicy", "Retain")
    spec.setdefault("volumeMode", "Filesystem")


def default_persistent_volume_claim(claim: dict[str, Any]) -> None:
    claim.setdefault("spec", {}).setdefault("volumeMode", "Filesystem")


def default_storage_class(storage_class: dict[str, Any]) -> None:
    storage_class.setdefault("reclaimPolicy", "Delete")
    storage_class.setdefault("volumeBindingMode", "Immediate")


def default_service(service: dict[str, Any]) -> None:
    spec = service.setdefault("spec", {})
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    for port in spec.get("ports") or []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port.get("port"))


def default_deployment(deployment: dict[str, Any]) -> None:
    spec = deployment.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    strategy = spec.setdefault("strategy", {})
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        rolling = strategy.setdefault("rollingUpdate", {})
        rolling.setdefault("maxUnavailable", "25%")
        rolling.setdefault("maxSurge", "25%")
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)
    _default_template(spec)


def default_replica_set(replica_set: dict[str, Any]) -> None:
    spec = replica_set.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    _default_template(spec)


def default_stateful_set(stateful_set: dict[str, Any]) -> None:
    spec = stateful_set.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    spec.setdefault("podManagementPolicy", "OrderedReady")
    strategy = spec.setdefault("updateStrategy", {"type": "RollingUpdate"})
    if strategy.get("type") == "RollingUpdate":
        strategy.setdefault("rollingUpdate", {"partition": 0})
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("persistentVolumeClaimRetentionPolicy", {"whenDeleted": "Retain", "whenScaled": "Retain"})
    _default_template(spec)


def default_daemon_set(daemon_set: dict[str, Any]) -> None:
    spec = daemon_set.setdefault("spec", {})
    strategy = spec.setdefault("updateStrategy", {})
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        rolling = strategy.setdefault("rollingUpdate", {})
        rolling.setdefault("maxUnavailable", 1)
        rolling.setdefault("maxSurge", 0)
    spec.setdefault("revisionHistoryLimit", 10)
    _default_template(spec)


def default_cron_job(cron_job: dict[str, Any]) -> None:
    spec = cron_job.setdefault("spec", {})
    spec.setdefault("concurrencyPolicy", "Allow")
    spec.setdefault("suspend", False)
    spec.setdefault("successfulJobsHistoryLimit", 3)
    spec.setdefault("failedJobsHistoryLimit", 1)
    job_spec = spec.setdefault("jobTemplate", {}).setdefault("spec", {})
    job_spec.setdefault("backoffLimit", 6)
    _default_template(job_spec)


NODE_INFO_FIELDS = (
    "machineID",
    "systemUUID",
    "bootID",
    "kernelVersion",
    "osImage",
    "containerRuntimeVersion",
    "kubeletVersion",
    "kubeProxyVersion",
    "operatingSystem",
    "architecture",
)


def default_node_status(node: dict[str, Any]) -> None:
    """NodeStatus fields Go always serialises: ``daemonEndpoints`` (Port 0) and every ``nodeInfo`` string."""
    status = node.setdefault("status", {})
    endpoint = status.setdefault("daemonEndpoints", {}).setdefault("kubeletEndpoint", {})
    endpoint.setdefault("Port", 0)
    info = status.setdefault("nodeInfo", {})
    for name in NODE_INFO_FIELDS:
        info.setdefault(name, "")


def default_job(job: dict[str, Any]) -> None:
    """SetDefaults_Job and the job strategy's generated selector (batch.kubernetes.io/controller-uid)."""
    spec = job.setdefault("spec", {})
    parallelism = spec.setdefault("parallelism", 1)
    spec.setdefault("completions", parallelism)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
    if not spec.get("manualSelector") and not spec.get("selector"):
        uid = job["metadata"].get("uid", "")
        name = job["metadata"].get("name", "")
        generated = {
            "batch.kubernetes.io/controller-uid": uid,
            "batch.kubernetes.io/job-name": name,
            "controller-uid": uid,
            "job-name": name,
        }
        spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
        template_meta = spec.setdefault("template", {}).setdefault("metadata", {})
        template_meta["labels"] = {**(template_meta.get("labels") or {}), **generated}
    _default_template(spec)


def _default_template(spec: dict[str, Any]) -> None:
    template = spec.get("template")
    if isinstance(template, dict):
        default_pod_spec(template.setdefault("spec", {}))


DEFAULT_SERVICE_ACCOUNT = "default"
# getServiceAccount: the default ServiceAccount is looked up this many times, 100-200 ms apart
# (kube-controller-manager may not have made it for a new namespace yet); any other, once.
DEFAULT_SERVICE_ACCOUNT_LOOKUPS = 10
MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"


def admit_service_account(
    pod: dict[str, Any],
    namespace: str,
    lookup: Callable[[str, str], dict[str, Any] | None],
    wait: Callable[[float], Any] = time.sleep,
) -> None:
    """The ServiceAccount admission plugin on a pod create (enabled by default in kube-apiserver):
    no ``serviceAccountName`` means ``default``, and the ServiceAccount must exist, else 403
    ``error looking up service account <ns>/<name>: serviceaccount "<name>" not found``.
    Mounting its token (a projected volume) is not emulated."""
    meta, spec = pod["metadata"], pod.setdefault("spec", {})
    if MIRROR_POD_ANNOTATION in (meta.get("annotations") or {}):
        if spec.get("serviceAccountName"):
            raise api_errors.forbidden(
                "pods", "", meta.get("name", ""), "a mirror pod may not reference service accounts"
            )
        return
    name = spec.get("serviceAccountName") or spec.get("serviceAccount") or DEFAULT_SERVICE_ACCOUNT
    spec["serviceAccountName"] = spec["serviceAccount"] = name
    attempts = DEFAULT_SERVICE_ACCOUNT_LOOKUPS if name == DEFAULT_SERVICE_ACCOUNT else 1
    interval = random.uniform(0.1, 0.2)
    for attempt in range(attempts):
        if attempt:
            wait(interval)
        if lookup(namespace, name) is not None:
            return
    raise api_errors.forbidden(
        "pods",
        "",
        meta.get("name", ""),
        f'error looking up service account {namespace}/{name}: serviceaccount "{name}" not found',
    )


def admit_node_create(node: dict[str, Any]) -> None:
    """TaintNodesByCondition: a new node is not ready until the kubelet says so."""
    taints = node.setdefault("spec", {}).setdefault("taints", [])
    if not any(t.get("key") == NOT_READY_TAINT and t.get("effect") == "NoSchedule" for t in taints):
        taints.append({"key": NOT_READY_TAINT, "effect": "NoSchedule"})


def default_crd(crd: dict[str, Any]) -> None:
    spec = crd.setdefault("spec", {})
    names = spec.setdefault("names", {})
    if names.get("kind"):
        names.setdefault("singular", names["kind"].lower())
        names.setdefault("listKind", names["kind"] + "List")
    spec.setdefault("conversion", {"strategy": "None"})
    for version in spec.get("versions") or []:
        if isinstance(version, dict):
            version.setdefault("served", True)
            version.setdefault("storage", False)


def set_crd_terminating(crd: dict[str, Any]) -> None:
    """The condition the CRD finalizer controller sets while it deletes the custom objects."""
    conditions = [
        c for c in (crd.get("status") or {}).get("conditions") or [] if c.get("type") != "Terminating"
    ]
    conditions.append(
        {
            "type": "Terminating",
            "status": "True",
            "reason": "InstanceDeletionInProgress",
            "message": "CustomResource deletion is in progress",
            "lastTransitionTime": now(),
        }
    )
    crd.setdefault("status", {})["conditions"] = conditions


def validate_stored_versions(crd: dict[str, Any], status: dict[str, Any] | None) -> list[FieldError]:
    """apiextensions' checks of ``status.storedVersions`` on an update: at least one, each a version
    of ``spec.versions`` (a spec write cannot drop a version still stored), the storage version
    among them (a spec write that changes it has it added first, by ``crd_status``)."""
    stored = list((status or {}).get("storedVersions") or [])
    if not stored:
        return [FieldError.invalid("status.storedVersions", stored, "must have at least one stored version")]
    versions = [v.get("name") for v in crd["spec"].get("versions") or []]
    problems = [
        FieldError.invalid(f"status.storedVersions[{i}]", name, "must appear in spec.versions")
        for i, name in enumerate(stored)
        if name not in versions
    ]
    storage = next((v.get("name") for v in crd["spec"].get("versions") or [] if v.get("storage")), None)
    if storage is not None and storage not in stored:
        problems.append(
            FieldError.invalid("status.storedVersions", stored, f"must have the storage version {storage}")
        )
    return problems


def crd_status(crd: dict[str, Any], old_status: dict[str, Any] | None) -> dict[str, Any]:
    spec = crd["spec"]
    stamp = now()
    stored = list((old_status or {}).get("storedVersions") or [])
    for v in spec.get("versions") or []:
        if v.get("storage") and v["name"] not in stored:
            stored.append(v["name"])
    conditions = [
        {
            "type": "NamesAccepted",
            "status": "True",
            "reason": "NoConflicts",
            "message": "no conflicts found",
            "lastTransitionTime": stamp,
        },
        {
            "type": "Established",
            "status": "True",
            "reason": "InitialNamesAccepted",
            "message": "the initial names have been accepted",
            "lastTransitionTime": stamp,
        },
    ]
    for old in (old_status or {}).get("conditions") or []:
        for cond in conditions:
            if cond["type"] == old.get("type") and old.get("status") == cond["status"]:
                cond["lastTransitionTime"] = old.get("lastTransitionTime", stamp)
    return {
        "acceptedNames": copy.deepcopy(spec.get("names") or {}),
        "conditions": conditions,
        "storedVersions": stored,
    }


# -------------------------------------------------------------------------------- validation


def validate_name(name: str) -> list[FieldError]:
    """ValidateObjectMeta's name check of most kinds: a DNS-1123 subdomain."""
    if not name:
        return [FieldError.required("metadata.name", "name or generateName is required")]
    if len(name) > 253 or not _SUBDOMAIN.match(name):
        return [FieldError.invalid("metadata.name", name, _SUBDOMAIN_MSG)]
    return []


def validate_label_name(name: str) -> list[FieldError]:
    """The name check of kinds whose names are DNS-1123 labels (namespaces)."""
    if not name:
        return [FieldError.required("metadata.name", "name or generateName is required")]
    if not _LABEL.match(name) or len(name) > 63:
        return [FieldError.invalid("metadata.name", name, _LABEL_MSG)]
    return []


def validate_metadata(obj: dict[str, Any]) -> list[FieldError]:
    errors: list[FieldError] = []
    meta = obj.get("metadata") or {}
    for key, value in (meta.get("labels") or {}).items():
        if not valid_label_key(key):
            errors.append(
                FieldError.invalid(
                    "metadata.labels",
                    key,
                    _LABEL_KEY_MSG,
                )
            )
        elif not isinstance(value, str) or not valid_label_value(value):
            errors.append(
                FieldError.invalid(
                    "metadata.labels",
                    value,
                    _LABEL_VALUE_MSG,
                )
            )
    for key, value in (meta.get("annotations") or {}).items():
        if not isinstance(value, str):
            errors.append(FieldError.invalid(f"metadata.annotations[{key}]", value, "must be a string"))
    return errors


def validate_taints(taints: list[Any], path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    seen: set[tuple[str, str]] = set()
    for i, taint in enumerate(taints):
        if not isinstance(taint, dict):
            errors.append(FieldError.invalid(f"{path}[{i}]", taint, "must be an object"))
            continue
        if not taint.get("key"):
            errors.append(FieldError.required(f"{path}[{i}].key"))
        if taint.get("effect") not in TAINT_EFFECTS:
            if not taint.get("effect"):
                errors.append(FieldError.required(f"{path}[{i}].effect"))
            else:
                errors.append(
                    FieldError.unsupported(f"{path}[{i}].effect", taint.get("effect"), TAINT_EFFECTS)
                )
        ident = (taint.get("key", ""), taint.get("effect", ""))
        if ident in seen:
            errors.append(FieldError.duplicate(f"{path}[{i}]", f"{ident[0]}:{ident[1]}"))
        seen.add(ident)
    return errors


def validate_pod_spec(spec: dict[str, Any], path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    containers = spec.get("containers")
    if not containers:
        errors.append(FieldError.required(f"{path}.containers"))
    names: set[str] = set()
    for field in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(field) or []):
            where = f"{path}.{field}[{i}]"
            if not isinstance(c, dict):
                errors.append(FieldError.invalid(where, c, "must be an object"))
                continue
            name = c.get("name")
            if not name:
                errors.append(FieldError.required(f"{where}.name"))
            elif name in names:
                errors.append(FieldError.duplicate(f"{where}.name", name))
            names.add(name or "")
            if not c.get("image"):
                errors.append(FieldError.required(f"{where}.image"))
            errors += _validate_resources(c.get("resources") or {}, f"{where}.resources")
    restart = spec.get("restartPolicy")
    if restart not in (None, "Always", "OnFailure", "Never"):
        errors.append(
            FieldError.unsupported(f"{path}.restartPolicy", restart, ["Always", "OnFailure", "Never"])
        )
    for i, tol in enumerate(spec.get("tolerations") or []):
        if not isinstance(tol, dict):
            continue
        op = tol.get("operator", "Equal")
        if op not in ("Equal", "Exists"):
            errors.append(
                FieldError.unsupported(f"{path}.tolerations[{i}].operator", op, ["Equal", "Exists"])
            )
        if op == "Exists" and tol.get("value"):
            errors.append(
                FieldError.invalid(
                    f"{path}.tolerations[{i}].operator",
                    tol.get("value"),
                    "value must be empty when `operator` is 'Exists'",
                )
            )
        effect = tol.get("effect")
        if effect not in (None, "", *TAINT_EFFECTS):
            errors.append(FieldError.unsupported(f"{path}.tolerations[{i}].effect", effect, TAINT_EFFECTS))
    return errors


def _validate_resources(resources: dict[str, Any], path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    parsed: dict[str, dict[str, Any]] = {}
    for part in ("requests", "limits"):
        for name, value in (resources.get(part) or {}).items():
            q = _quantity(value)
            if q is None:
                errors.append(
                    FieldError.invalid(
                        f"{path}.{part}[{name}]",
                        value,
                        _QUANTITY_MSG,
                    )
                )
            elif q < 0:
                errors.append(
                    FieldError.invalid(f"{path}.{part}[{name}]", value, "must be greater than or equal to 0")
                )
            else:
                parsed.setdefault(part, {})[name] = q
    for name, req in parsed.get("requests", {}).items():
        lim = parsed.get("limits", {}).get(name)
        if lim is not None and req > lim:
            errors.append(
                FieldError.invalid(
                    f"{path}.requests",
                    resources["requests"][name],
                    f"must be less than or equal to {name} limit of {resources['limits'][name]}",
                )
            )
    return errors


def validate_workload(spec: dict[str, Any]) -> list[FieldError]:
    errors: list[FieldError] = []
    selector = spec.get("selector")
    if not selector:
        errors.append(FieldError.required("spec.selector"))
    template = spec.get("template") or {}
    labels = (template.get("metadata") or {}).get("labels") or {}
    if selector and not (selector.get("matchLabels") or selector.get("matchExpressions")):
        errors.append(
            FieldError.invalid("spec.selector", selector, "empty selector is invalid for deployment")
        )
    elif selector and not match_selector_object(selector, labels):
        errors.append(
            FieldError.invalid(
                "spec.template.metadata.labels", labels, "`selector` does not match template `labels`"
            )
        )
    replicas = spec.get("replicas")
    if isinstance(replicas, int) and replicas < 0:
        errors.append(FieldError.invalid("spec.replicas", replicas, "must be greater than or equal to 0"))
    errors += validate_pod_spec(template.get("spec") or {}, "spec.template.spec")
    return errors


def validate_pod_disruption_budget(pdb: dict[str, Any]) -> list[FieldError]:
    spec = pdb.get("spec") or {}
    if "minAvailable" in spec and "maxUnavailable" in spec:
        return [FieldError.invalid("spec", spec, "minAvailable and maxUnavailable cannot be both set")]
    return []


def validate_storage_class(storage_class: dict[str, Any]) -> list[FieldError]:
    if not storage_class.get("provisioner"):
        return [FieldError.required("provisioner")]
    return []


def validate_volume_attachment(attachment: dict[str, Any]) -> list[FieldError]:
    """pkg/apis/storage/validation ValidateVolumeAttachment: attacher, nodeName and exactly one source."""
    errors: list[FieldError] = []
    spec = attachment.get("spec") or {}
    for field in ("attacher", "nodeName"):
        if not spec.get(field):
            errors.append(FieldError.required(f"spec.{field}"))
    source = spec.get("source") or {}
    if bool(source.get("persistentVolumeName")) == bool(source.get("inlineVolumeSpec")):
        errors.append(
            FieldError.invalid(
                "spec.source",
                source,
                "must specify exactly one of persistentVolumeName and inlineVolumeSpec",
            )
        )
    return errors


def validate_lease(lease: dict[str, Any]) -> list[FieldError]:
    duration = (lease.get("spec") or {}).get("leaseDurationSeconds")
    if duration is not None and (not isinstance(duration, int) or duration <= 0):
        return [FieldError.invalid("spec.leaseDurationSeconds", duration, "must be greater than 0")]
    return []


def validate_selector_immutable(new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
    """A workload's selector cannot change after create (apps/v1)."""
    new_selector = (new.get("spec") or {}).get("selector")
    if new_selector != (old.get("spec") or {}).get("selector"):
        return [FieldError.invalid("spec.selector", new_selector, "field is immutable")]
    return []


def validate_provider_id_update(new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
    """A node's providerID may only be set from empty."""
    before = (old.get("spec") or {}).get("providerID")
    after = (new.get("spec") or {}).get("providerID")
    if before and after != before:
        return [
            FieldError.forbidden(
                "spec.providerID", 'node updates may not change providerID except from "" to valid'
            )
        ]
    return []


def validate_crd(crd: dict[str, Any]) -> list[FieldError]:
    errors: list[FieldError] = []
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group = spec.get("group") or ""
    if not group:
        errors.append(FieldError.required("spec.group"))
    elif "." not in group:
        errors.append(FieldError.invalid("spec.group", group, "should be a domain with at least one dot"))
    if not names.get("plural"):
        errors.append(FieldError.required("spec.names.plural"))
    if not names.get("kind"):
        errors.append(FieldError.required("spec.names.kind"))
    name = crd.get("metadata", {}).get("name")
    if names.get("plural") and group and name != f"{names['plural']}.{group}":
        errors.append(FieldError.invalid("metadata.name", name, 'must be spec.names.plural+"."+spec.group'))
    if spec.get("scope") not in ("Cluster", "Namespaced"):
        errors.append(FieldError.unsupported("spec.scope", spec.get("scope"), ["Cluster", "Namespaced"]))
    versions = spec.get("versions") or []
    if not versions:
        errors.append(
            FieldError.required("spec.versions", "must have exactly one version marked as storage version")
        )
    elif sum(1 for v in versions if v.get("storage")) != 1:
        errors.append(
            FieldError.invalid(
                "spec.versions",
                [v.get("name") for v in versions],
                "must have exactly one version marked as storage version",
            )
        )
    for i, v in enumerate(versions):
        schema = (v.get("schema") or {}).get("openAPIV3Schema")
        if not schema:
            errors.append(
                FieldError.required(f"spec.versions[{i}].schema.openAPIV3Schema", "schemas are required")
            )
        elif schema.get("type") != "object":
            errors.append(
                FieldError.invalid(
                    f"spec.versions[{i}].schema.openAPIV3Schema.type",
                    schema.get("type"),
                    "must be object at the root",
                )
            )
    strategy = (spec.get("conversion") or {}).get("strategy", "None")
    if strategy not in ("None", "Webhook"):
        errors.append(FieldError.unsupported("spec.conversion.strategy", strategy, ["None", "Webhook"]))
    errors += _validate_conversion_webhook(spec.get("conversion") or {}, strategy)
    return errors


def _validate_conversion_webhook(conversion: dict[str, Any], strategy: str) -> list[FieldError]:
    """apiextensions validation of ``spec.conversion.webhook`` (what the emulator can call: a URL)."""
    webhook = conversion.get("webhook")
    if strategy != "Webhook":
        if webhook is not None:
            return [
                FieldError.forbidden(
                    "spec.conversion.webhook", "should not be set when strategy is not set to Webhook"
                )
            ]
        return []
    if not isinstance(webhook, dict):
        return [FieldError.required("spec.conversion.webhook", "required when strategy is set to Webhook")]
    errors: list[FieldError] = []
    versions = webhook.get("conversionReviewVersions") or []
    if not any(v in ("v1", "v1beta1") for v in versions):
        errors.append(
            FieldError.invalid(
                "spec.conversion.webhook.conversionReviewVersions",
                versions,
                "must include at least one of v1, v1beta1",
            )
        )
    client = webhook.get("clientConfig") or {}
    if bool(client.get("url")) == bool(client.get("service")):
        errors.append(
            FieldError.required(
                "spec.conversion.webhook.clientConfig", "exactly one of url or service is required"
            )
        )
    elif client.get("url") and not str(client["url"]).startswith("https://"):
        errors.append(
            FieldError.invalid(
                "spec.conversion.webhook.clientConfig.url",
                client["url"],
                "'https' is the only allowed URL scheme",
            )
        )
    return errors


_POD_MUTABLE_MSG = (
    "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,"
    "`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),"
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"
)


def validate_pod_update(new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
    """Pod specs are immutable apart from images, activeDeadlineSeconds and added tolerations."""

    def masked(spec: dict[str, Any]) -> dict[str, Any]:
        spec = copy.deepcopy(spec)
        for field in ("containers", "initContainers"):
            for c in spec.get(field) or []:
                if isinstance(c, dict):
                    c.pop("image", None)
        spec.pop("activeDeadlineSeconds", None)
        spec.pop("tolerations", None)
        spec.pop("schedulingGates", None)
        return spec

    new_spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    errors: list[FieldError] = []
    if masked(new_spec) != masked(old_spec):
        errors.append(FieldError.forbidden("spec", _POD_MUTABLE_MSG))
    old_tols = old_spec.get("tolerations") or []
    new_tols = new_spec.get("tolerations") or []
    if any(t not in new_tols for t in old_tols):
        errors.append(
            FieldError.forbidden(
                "spec.tolerations", "existing toleration can not be modified except its tolerationSeconds"
            )
        )
    if len(new_spec.get("schedulingGates") or []) > len(old_spec.get("schedulingGates") or []):
        errors.append(
            FieldError.forbidden(
                "spec.schedulingGates", "only deletion is allowed, but found new scheduling gate"
            )
        )
    return errors
