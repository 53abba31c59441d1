"""The garbage collector of kube-controller-manager: ownerReferences, cascading deletion.

The API server turns a delete's ``propagationPolicy`` into finalizers (``orphan`` for Orphan,
``foregroundDeletion`` for Foreground; Background deletes the owner at once); this collector does
the rest, as the real one (pkg/controller/garbagecollector) does:

* an object whose owners are all gone (none of its ownerReferences' uids exists) is deleted, in the
  background, or in the foreground when an owner it references is itself being deleted in the
  foreground;
* dependents of an owner deleting in the foreground are deleted; the owner's ``foregroundDeletion``
  finalizer goes once no dependent with ``blockOwnerDeletion: true`` is left;
* dependents of an owner carrying ``orphan`` lose their ownerReference to it, then the finalizer goes.

Every resource discovery lists with ``list`` and ``delete`` takes part, custom resources included
(so deleting a NodePool reaches the NodeClaims that reference it). As the real one keeps a
(metadata) informer per such resource, started and stopped as discovery finds resources come and
go, this one keeps an informer per resource (``ReconcileLoop``'s, with its expectations for its own
deletes and patches) and passes on their events, at most every ``debounce`` seconds: it reads
every object of every resource in a pass, where the real one updates its graph per event. Listing
every resource every two seconds instead was a twentieth of a sandbox story's CPU.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from kubernetes.client.exceptions import ApiException

from sandbox.simulators.kube import JSON_PATCH, Kube
from sandbox.simulators.loop import ReconcileLoop, log

ORPHAN = "orphan"
FOREGROUND = "foregroundDeletion"
DISCOVERY_TTL = 10.0
SKIPPED = {("", "events"), ("events.k8s.io", "events"), ("", "bindings")}


@dataclass(frozen=True)
class Kind:
    group: str
    version: str
    plural: str
    namespaced: bool

    def path(self, namespace: str | None = None, name: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        parts = [base]
        if self.namespaced and namespace:
            parts += ["namespaces", namespace]
        parts.append(self.plural)
        if name:
            parts.append(name)
        return "/".join(parts)


class GarbageCollector(ReconcileLoop):
    name = "garbage-collector"
    debounce = 0.25

    def __init__(self, kube: Kube, resync: float = 1.0) -> None:
        super().__init__(kube, resync)
        self._kinds: list[Kind] = []
        self._discovered_at = 0.0
        self.informed_paths = ()  # follows discovery (``_keep_informers``)
        kube.write_listeners.append(self._wrote)

    def start(self) -> None:
        super().start()  # the pass thread; a watch per resource follows discovery
        self._keep_informers(self.kinds())

    def watching(self, path: str) -> bool:
        return path in self.informed_paths

    def _keep_informers(self, kinds: list[Kind]) -> None:
        """Keep an informer on each discovered resource: start a watch for a new one; a removed one's
        watch ends (``watching``) once its stream does."""
        paths = tuple(kind.path() for kind in kinds)
        new = [path for path in paths if path not in self.informed_paths]
        self.informed_paths = paths
        for path in new:
            self._start_watch(path)

    def kinds(self) -> list[Kind]:
        """Resources that can be listed and deleted, from discovery (cached a few seconds)."""
        if time.monotonic() - self._discovered_at < DISCOVERY_TTL:
            return self._kinds
        found: list[Kind] = []
        versions = [("", "v1")]
        for api_group in self.kube.get("/apis").get("groups") or []:
            preferred = (api_group.get("preferredVersion") or {}).get("version")
            if preferred:
                versions.append((api_group["name"], preferred))
        for group, version in versions:
            path = f"/apis/{group}/{version}" if group else f"/api/{version}"
            try:
                resources = self.kube.get(path).get("resources") or []
            except ApiException:
                continue
            for resource in resources:
                verbs = set(resource.get("verbs") or [])
                if "/" in resource["name"] or not {"list", "delete"} <= verbs:
                    continue
                if (group, resource["name"]) in SKIPPED:
                    continue
                found.append(Kind(group, version, resource["name"], bool(resource.get("namespaced"))))
        self._kinds, self._discovered_at = found, time.monotonic()
        return found

    def reconcile(self) -> None:
        kinds = self.kinds()
        self._keep_informers(kinds)
        objects: dict[str, tuple[Kind, dict[str, Any]]] = {}
        for kind in kinds:
            try:
                items = self.view(kind.path())
            except ApiException:
                continue  # a CRD removed meanwhile
            for item in items:
                objects[item["metadata"]["uid"]] = (kind, item)
        dependents: dict[str, list[tuple[Kind, dict[str, Any], dict[str, Any]]]] = {}
        for kind, item in objects.values():
            refs = item["metadata"].get("ownerReferences") or []
            for ref in refs:
                dependents.setdefault(ref.get("uid", ""), []).append((kind, item, ref))
            if refs and not item["metadata"].get("deletionTimestamp"):
                self._collect_if_orphaned(kind, item, refs, objects)
        for uid, (kind, owner) in objects.items():
            finalizers = owner["metadata"].get("finalizers") or []
            if not owner["metadata"].get("deletionTimestamp"):
                continue
            if ORPHAN in finalizers:
                self._orphan(kind, owner, dependents.get(uid, []))
            elif FOREGROUND in finalizers:
                self._foreground(kind, owner, dependents.get(uid, []))

    def _collect_if_orphaned(
        self, kind: Kind, item: dict[str, Any], refs: list[dict[str, Any]], objects: dict[str, Any]
    ) -> None:
        owners = [objects.get(ref.get("uid", "")) for ref in refs]
        if any(owner is not None and not _deleting_in_foreground(owner[1]) for owner in owners):
            return  # a live owner keeps it
        live = [owner for owner in owners if owner is not None]
        policy = "Foreground" if live else "Background"  # every remaining owner waits for it
        self._delete(kind, item, policy)

    def _foreground(self, kind: Kind, owner: dict[str, Any], dependents: list[Any]) -> None:
        blocking = [d for d in dependents if d[2].get("blockOwnerDeletion")]
        if not blocking:
            self._drop_finalizer(kind, owner, FOREGROUND)

    def _orphan(self, kind: Kind, owner: dict[str, Any], dependents: list[Any]) -> None:
        uid = owner["metadata"]["uid"]
        for dependent_kind, dependent, _ in dependents:
            meta = dependent["metadata"]
            kept = [r for r in meta.get("ownerReferences") or [] if r.get("uid") != uid]
            self._patch(dependent_kind, dependent, "ownerReferences", kept)
        if not dependents:
            self._drop_finalizer(kind, owner, ORPHAN)

    def _drop_finalizer(self, kind: Kind, obj: dict[str, Any], finalizer: str) -> None:
        meta = obj["metadata"]
        kept = [f for f in meta.get("finalizers") or [] if f != finalizer]
        self._patch(kind, obj, "finalizers", kept)

    def _patch(self, kind: Kind, obj: dict[str, Any], field: str, value: list[Any]) -> None:
        """Set (or remove, when empty) one metadata list, guarded by the resourceVersion read: a JSON
        patch whose ``test`` fails (422) or a conflict leaves it to the next pass, on fresh state."""
        meta = obj["metadata"]
        change = {"op": "replace", "path": f"/metadata/{field}", "value": value} if value else None
        if change is None and field in meta:
            change = {"op": "remove", "path": f"/metadata/{field}"}
        if change is None:
            return
        patch = [
            {"op": "test", "path": "/metadata/resourceVersion", "value": meta["resourceVersion"]},
            change,
        ]
        try:
            self.kube.patch(kind.path(meta.get("namespace"), meta["name"]), patch, JSON_PATCH)
        except ApiException as exc:
            if exc.status not in (404, 409, 422):
                raise

    def _delete(self, kind: Kind, obj: dict[str, Any], policy: str) -> None:
        meta = obj["metadata"]
        log.debug("garbage collecting %s %s (%s)", kind.plural, meta["name"], policy)
        try:
            self.kube.delete(
                kind.path(meta.get("namespace"), meta["name"]), uid=meta.get("uid"), propagation_policy=policy
            )
        except ApiException as exc:
            if exc.status not in (404, 409):
                raise


def _deleting_in_foreground(obj: dict[str, Any]) -> bool:
    meta = obj["metadata"]
    return bool(meta.get("deletionTimestamp")) and FOREGROUND in (meta.get("finalizers") or [])
