"""Which VolumeAttachments of a drained node hold its instance (``termination.volumes``): those of
volumes a pod the drain waits for has left, never an inline volume or one a pod that stays uses."""

from __future__ import annotations

from typing import Any

from fakes import T0
from nodewright.termination.volumes import blocking_attachments

STAYS = [{"key": "karpenter.sh/disrupted", "operator": "Exists"}]  # the drain does not wait for it


def attachment(name: str, node: str, pv: str | None) -> dict[str, Any]:
    source = {"persistentVolumeName": pv} if pv else {"inlineVolumeSpec": {}}
    return {"metadata": {"name": name}, "spec": {"nodeName": node, "source": source}}


def pvc(name: str, volume: str, namespace: str | None = "apps") -> dict[str, Any]:
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"metadata": meta, "spec": {"volumeName": volume}}


def pod(name: str, volumes: list[dict[str, Any]], namespace: str = "apps", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace}, "spec": {"volumes": volumes, **spec}}


def test_the_instance_waits_only_for_the_volumes_no_staying_pod_holds() -> None:
    attachments = [
        attachment("inline", "n1", None),
        attachment("kept-by-claim", "n1", "pv-a"),
        attachment("kept-ephemeral", "n1", "pv-b"),
        attachment("left", "n1", "pv-c"),
        attachment("default-ns", "n1", "pv-d"),
        attachment("other-node", "n2", "pv-e"),
    ]
    claims = [
        pvc("data", "pv-a"),
        pvc("cache-scratch", "pv-b"),
        pvc("logs", "pv-c"),
        pvc("data", "pv-d", namespace=None),
    ]
    pods = [
        pod("db", [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}], tolerations=STAYS),
        pod("cache", [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}}], tolerations=STAYS),
        pod("app", [{"name": "l", "persistentVolumeClaim": {"claimName": "logs"}}]),  # drained: it leaves
    ]
    waiting = blocking_attachments("n1", attachments, pods, claims, T0)
    assert [a["metadata"]["name"] for a in waiting] == ["left", "default-ns"]
    assert blocking_attachments("n3", attachments, pods, claims, T0) == []
