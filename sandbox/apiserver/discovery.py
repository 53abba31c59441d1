"""Discovery documents: /version, /api, /apis, and the per group-version resource lists kubectl reads."""

from __future__ import annotations

from typing import Any

from .resources import Registry, ResourceType

# What kube-apiserver v1.36.1 answers on /version (its official build; seen on a cluster of that
# release): the binary version, the emulation version (the binary's minor unless
# --emulated-version says otherwise) and the minimum compatibility version (one minor before).
VERSION_INFO = {
    "major": "1",
    "minor": "36",
    "emulationMajor": "1",
    "emulationMinor": "36",
    "minCompatibilityMajor": "1",
    "minCompatibilityMinor": "35",
    "gitVersion": "v1.36.1",
    "gitCommit": "756939600b9a7180fc2df6550a4585b638875e67",
    "gitTreeState": "clean",
    "buildDate": "2026-05-12T09:51:34Z",
    "goVersion": "go1.26.2",
    "compiler": "gc",
    "platform": "linux/amd64",
}

# Extra entries discovery shows under a resource (name, kind, verbs, group/version override).
_SUBRESOURCE_ENTRIES: dict[str, tuple[str, list[str], str, str]] = {
    "status": ("", ["get", "patch", "update"], "", ""),
    "scale": ("Scale", ["get", "patch", "update"], "autoscaling", "v1"),
    "binding": ("Binding", ["create"], "", ""),
    "eviction": ("Eviction", ["create"], "policy", "v1"),
    "finalize": ("", ["update"], "", ""),
}


def api_versions(server_address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


def _group(name: str, versions: list[str]) -> dict[str, Any]:
    entries = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": entries, "preferredVersion": entries[0]}


def api_group_list(registry: Registry) -> dict[str, Any]:
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [_group(g, vs) for g, vs in registry.group_versions()],
    }


def api_group(registry: Registry, group: str) -> dict[str, Any] | None:
    for name, versions in registry.group_versions():
        if name == group:
            return {"kind": "APIGroup", "apiVersion": "v1", **_group(name, versions)}
    return None


def _entry(rt: ResourceType) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": rt.plural,
        "singularName": rt.singular,
        "namespaced": rt.namespaced,
        "kind": rt.kind,
        "verbs": rt.verbs,
        **_names(rt),
    }
    return entry


def _names(rt: ResourceType) -> dict[str, list[str]]:
    """shortNames and categories, present only when the resource has any (as discovery serialises)."""
    names: dict[str, list[str]] = {}
    if rt.short_names:
        names["shortNames"] = list(rt.short_names)
    if rt.categories:
        names["categories"] = list(rt.categories)
    return names


def resource_list(registry: Registry, group: str, version: str) -> dict[str, Any]:
    resources: list[dict[str, Any]] = []
    for rt in registry.resources_of(group, version):
        resources.append(_entry(rt))
        for sub in sorted(rt.subresources):
            kind, verbs, sub_group, sub_version = _SUBRESOURCE_ENTRIES[sub]
            entry: dict[str, Any] = {
                "name": f"{rt.plural}/{sub}",
                "singularName": "",
                "namespaced": rt.namespaced,
                "kind": kind or rt.kind,
                "verbs": verbs,
            }
            if sub_group:
                entry["group"] = sub_group
                entry["version"] = sub_version
            resources.append(entry)
    if group == "" and version == "v1":
        resources.append(
            {
                "name": "bindings",
                "singularName": "binding",
                "namespaced": True,
                "kind": "Binding",
                "verbs": ["create"],
            }
        )
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }


AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


def wants_aggregated(accept: str) -> bool:
    """kubectl (1.30+) asks /api and /apis for the aggregated form first (apidiscovery.k8s.io/v2)."""
    return any(
        "g=apidiscovery.k8s.io" in part
        and "v=v2" in part
        and "as=APIGroupDiscoveryList" in part
        and "v=v2beta1" not in part
        for part in accept.split(",")
    )


def _aggregated_resource(rt: ResourceType) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "resource": rt.plural,
        "responseKind": {"group": rt.group, "version": rt.version, "kind": rt.kind},
        "scope": "Namespaced" if rt.namespaced else "Cluster",
        "singularResource": rt.singular,
        "verbs": rt.verbs,
        **_names(rt),
    }
    subresources = []
    for sub in sorted(rt.subresources):
        kind, verbs, sub_group, sub_version = _SUBRESOURCE_ENTRIES[sub]
        subresources.append(
            {
                "subresource": sub,
                "responseKind": {
                    "group": sub_group if sub_group else rt.group,
                    "version": sub_version if sub_group else rt.version,
                    "kind": kind or rt.kind,
                },
                "verbs": verbs,
            }
        )
    if subresources:
        entry["subresources"] = subresources
    return entry


def aggregated(registry: Registry, core: bool) -> dict[str, Any]:
    """The APIGroupDiscoveryList of /api (``core``) or /apis: every group, version and resource."""
    groups = [("", ["v1"])] if core else registry.group_versions()
    items = []
    for name, versions in groups:
        entries = []
        for version in versions:
            resources = [_aggregated_resource(rt) for rt in registry.resources_of(name, version)]
            if core and version == "v1":
                resources.append(
                    {
                        "resource": "bindings",
                        "responseKind": {"group": "", "version": "v1", "kind": "Binding"},
                        "scope": "Namespaced",
                        "singularResource": "binding",
                        "verbs": ["create"],
                    }
                )
            entries.append({"version": version, "resources": resources, "freshness": "Current"})
        items.append({"metadata": {"name": name, "creationTimestamp": None}, "versions": entries})
    return {
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items,
    }
