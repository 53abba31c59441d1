"""Helpers for tests that drive the emulator: a kubectl runner and a kubelet stand-in for deletions.

The real kubelet confirms a graceful pod deletion with a grace-0 delete once the containers stop;
:class:`DeletionConfirmer` does only that, through the API, so ``kubectl drain`` and evictions finish
in tests that do not start the cluster simulators.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"


def kubectl(
    kubeconfig: Path, *args: str, timeout: float = 60, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the real kubectl against ``kubeconfig``; never raises on a non-zero exit (tests assert on it)."""
    return subprocess.run(
        [KUBECTL, "--kubeconfig", str(kubeconfig), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


class DeletionConfirmer:
    """Deletes, with grace 0, every pod that carries a deletionTimestamp (what a kubelet does)."""

    def __init__(self, core_v1: Any, interval: float = 0.05) -> None:
        self._api = core_v1
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="deletion-confirmer", daemon=True)

    def __enter__(self) -> DeletionConfirmer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                pods = self._api.list_pod_for_all_namespaces().items
            except (ApiException, HTTPError, OSError):
                continue
            for pod in pods:
                if pod.metadata.deletion_timestamp and pod.metadata.deletion_grace_period_seconds:
                    with contextlib.suppress(ApiException):  # already gone is fine
                        self._api.delete_namespaced_pod(
                            pod.metadata.name, pod.metadata.namespace, grace_period_seconds=0
                        )
