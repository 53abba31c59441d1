"""Helpers for tests that drive the emulator: a kubectl runner, a kubelet stand-in for deletions, and
an HTTPS JSON server to stand in for a webhook the emulator calls.

The real kubelet confirms a graceful pod deletion with a grace-0 delete once the containers stop;
:class:`DeletionConfirmer` does only that, through the API, so ``kubectl drain`` and evictions finish
in tests that do not start the cluster simulators.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
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


class JsonWebhookServer:
    """HTTPS on 127.0.0.1 with a throw-away CA (``ca_bundle`` for a clientConfig): each POSTed JSON
    body is recorded in ``requests`` and answered with ``answer(body)`` as JSON."""

    def __init__(self, answer: Callable[[Any], Any], path: str = "/") -> None:
        from .tls import make_serving_cert

        self.requests: list[Any] = []
        self.paths: list[str] = []  # each request's path and query
        cert = make_serving_cert("127.0.0.1")
        self.ca_bundle = cert.ca_data
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(request)
                server.paths.append(self.path)
                body = json.dumps(answer(request)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        class QuietServer(ThreadingHTTPServer):
            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # the emulator hung up (a webhook's timeout): expected in timeout tests

        self._httpd = QuietServer(("127.0.0.1", 0), Handler)
        self._httpd.socket = cert.context.wrap_socket(self._httpd.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self._httpd.server_address[1]}{path}"
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
