"""The HTTP server: a stdlib ThreadingHTTPServer speaking HTTP/1.1 with keep-alive and chunked watches.

``ApiServer.stop()`` ends serve_forever, wakes every watch, shuts the sockets of idle keep-alive
connections and joins every request thread, so nothing outlives it (no thread, no listening port).
"""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
import socket
import ssl
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import yaml

from . import admission, rbac
from .flowcontrol import FlowControl
from .handlers import Request, Response
from .resources import Registry
from .routing import ANONYMOUS_EKS, Router
from .storage import Store
from .tls import ServingCert, make_serving_cert

log = logging.getLogger(__name__)

INITIAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = False  # joined in server_close(): stop() leaves no thread behind
    block_on_close = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], router: Router, tls: ssl.SSLContext) -> None:
        self.router = router
        self.tls = tls
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        self.stopping = threading.Event()
        self.faults: Any = None  # sandbox.aws.faults.ApiServerFaults, when a test injects faults
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.connections_lock:
            self.connections.add(request)
        super().process_request(request, client_address)

    def finish_request(self, request: Any, client_address: Any) -> None:
        """Serve TLS or plain HTTP on the same port, told apart by the first byte (0x16: a ClientHello)."""
        try:
            request.settimeout(30)
            first = request.recv(1, socket.MSG_PEEK)
            request.settimeout(None)
        except OSError:
            return
        if first == b"\x16":
            raw = request
            try:
                request = self.tls.wrap_socket(raw, server_side=True)
            except (OSError, ssl.SSLError):
                return
            with self.connections_lock:  # the wrapped socket now owns the file descriptor
                self.connections.discard(raw)
                self.connections.add(request)
        try:
            super().finish_request(request, client_address)
        finally:
            with self.connections_lock:
                self.connections.discard(request)

    def shutdown_request(self, request: Any) -> None:
        with self.connections_lock:
            self.connections.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up (a watch cut at stop, kubectl exiting) is routine, not a traceback."""
        if isinstance(sys.exc_info()[1], OSError):  # ConnectionError and ssl.SSLError are OSErrors
            log.debug("client %s disconnected", client_address)
            return
        super().handle_error(request, client_address)

    def close_connections(self) -> None:
        with self.connections_lock:
            for conn in list(self.connections):
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are separate writes: avoid the 40 ms delayed-ACK stall
    server: _HTTPServer
    server_version = "nodewright-apiserver"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s - %s", self.address_string(), format % args)

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _serve(self) -> None:
        started = time.perf_counter()
        split = urlsplit(self.path)
        headers = {k.lower(): v for k, v in self.headers.items()}
        # kubectl --as-group sends one Impersonate-Group header per group.
        groups = self.headers.get_all("Impersonate-Group") or []
        if groups:
            headers["impersonate-group"] = "\n".join(groups)
        request = Request(
            method=self.command,
            path=split.path,
            query=dict(parse_qsl(split.query, keep_blank_values=True)),
            headers=headers,
            body=self._read_body(),
        )
        injected = self._injected_fault(request)
        if injected == "drop":  # the server is "down": no answer, the connection closes
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return
        if isinstance(injected, tuple):
            code, body, headers = injected
            kind = "text/plain; charset=utf-8" if isinstance(body, str) else "application/json"
            self._send(Response(code, body, headers=dict(headers), content_type=kind))
            return
        try:
            response = self.server.router.handle(request)
        except Exception as exc:  # a bug must answer 500, not kill the connection silently
            log.exception("unhandled error serving %s %s", self.command, self.path)
            message = f"Internal error occurred: {type(exc).__name__}: {exc}"
            response = Response(
                500,
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Failure",
                    "message": message,
                    "reason": "InternalError",
                    "details": {"causes": [{"message": str(exc)}]},
                    "code": 500,
                },
            )
        try:
            if response.stream is not None:
                self._stream(response)
            else:
                self._send(response)
        finally:
            if response.sent is not None:
                response.sent()
        log.debug(
            "%s %s -> %s in %.1f ms",
            self.command,
            self.path,
            response.code,
            (time.perf_counter() - started) * 1e3,
        )

    def _injected_fault(self, request: Request) -> Any:
        """What the sandbox's fault injector (``sandbox.aws.faults.ApiServerFaults``) makes of this request:
        None to serve it, ``"drop"``, or ``(status, body, headers)`` (a ``str`` body is plain text, a
        dict a JSON ``Status``); a delay is slept here."""
        faults = self.server.faults
        if faults is None:
            return None
        answer = faults.answer(request.method, request.path, request.headers, request.body)
        if isinstance(answer, int | float) and not isinstance(answer, bool):
            self.server.stopping.wait(float(answer))
            return None
        return answer

    def _headers(self, response: Response) -> None:
        self.send_response(response.code)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Cache-Control", "no-cache, private")
        for name, value in response.headers.items():
            self.send_header(name, value)
        for warning in dict.fromkeys(response.warnings):  # the recorder sends a text once
            escaped = warning.replace("\\", "\\\\").replace('"', '\\"')
            self.send_header("Warning", f'299 - "{escaped}"')

    def _send(self, response: Response) -> None:
        body = response.body
        if isinstance(body, str):
            payload = body.encode()
        elif isinstance(body, bytes):
            payload = body
        elif response.items_of and isinstance(body, dict) and isinstance(body.get("items"), list):
            payload = self.server.router.handlers.encoded.list_body(response.items_of, body)
        else:
            payload = json.dumps(body, separators=(",", ":")).encode()
        self._headers(response)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    def _stream(self, response: Response) -> None:
        self._headers(response)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        assert response.stream is not None
        try:
            for chunk in response.stream:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True
        finally:
            close = getattr(response.stream, "close", None)
            if close:
                close()

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _serve


class ApiServer:
    """A Kubernetes API emulator on 127.0.0.1, for the real kubernetes client and kubectl.

    ``start()`` returns once the socket listens; ``stop()`` leaves no thread or port behind. Usable as a
    context manager.
    """

    ADMIN = rbac.Identity("kubernetes-admin", (rbac.MASTERS, rbac.AUTHENTICATED))

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | None = None,
        watch_history: int = 1000,
        *,
        anonymous: str = ANONYMOUS_EKS,
        concurrency: int | None = None,
    ) -> None:
        """``anonymous``: how a request without credentials is treated, as on EKS (the default: only
        the health checks) or as by kube-apiserver's ``--anonymous-auth=true`` (RBAC decides).

        ``concurrency``: the seats API Priority and Fairness shares among its priority levels
        (``flowcontrol``): kube-apiserver's 600 by default, or ``NODEWRIGHT_SANDBOX_API_CONCURRENCY``;
        a test makes it small to meet 429s."""
        self.host = host
        self.anonymous = anonymous
        self.port = port
        self.token = token or secrets.token_urlsafe(24)
        # kube-apiserver's static token file: bearer token -> identity (the first is the administrator's).
        self.identities: dict[str, rbac.Identity] = {self.token: self.ADMIN}
        self.store = Store(history=watch_history)
        self.registry = Registry()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._cleaner: threading.Thread | None = None
        self._cert: ServingCert | None = None
        self.faults: Any = None  # set before start(): consulted before every request is routed
        self.flow_control = FlowControl(concurrency, count=self.store.count)
        self._seed()

    def add_identity(self, user: str, groups: tuple[str, ...] = (), token: str | None = None) -> str:
        """Accept a bearer token for ``user`` in ``groups`` (plus system:authenticated); the token."""
        token = token or secrets.token_urlsafe(24)
        self.identities[token] = rbac.Identity(user, (*groups, rbac.AUTHENTICATED))
        return token

    def _seed(self) -> None:
        for key, obj in rbac.bootstrap_policy():
            obj["metadata"]["uid"] = str(uuid.uuid4())
            self.store.write(key, obj)
        for name in INITIAL_NAMESPACES:
            self.store.write(
                ("", "namespaces"),
                {
                    "kind": "Namespace",
                    "apiVersion": "v1",
                    "metadata": {
                        "name": name,
                        "uid": str(uuid.uuid4()),
                        "creationTimestamp": admission.now(),
                        "labels": {"kubernetes.io/metadata.name": name},
                    },
                    "spec": {"finalizers": ["kubernetes"]},
                    "status": {"phase": "Active"},
                },
            )

    @property
    def url(self) -> str:
        """Plain HTTP (the same port also speaks HTTPS, see :attr:`https_url`)."""
        return f"http://{self.host}:{self.port}"

    @property
    def https_url(self) -> str:
        return f"https://{self.host}:{self.port}"

    @property
    def ca_pem(self) -> bytes:
        """The PEM of the CA that signed the serving certificate (after ``start()``)."""
        if self._cert is None:
            raise RuntimeError("start() the server first: the certificate is made at start")
        return self._cert.ca_pem

    def start(self) -> ApiServer:
        if self._httpd is not None:
            return self
        router = Router(
            self.store,
            self.registry,
            self.identities,
            lambda: f"{self.host}:{self.port}",
            self._stopping,
            anonymous=self.anonymous,
            flow_control=self.flow_control,
        )
        if self._cert is None:
            self._cert = make_serving_cert(self.host)
        self._httpd = _HTTPServer((self.host, self.port), router, self._cert.context)
        self._httpd.faults = self.faults
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.1},
            name=f"apiserver-{self.port}",
            daemon=True,
        )
        self._thread.start()
        self._cleaner = threading.Thread(
            target=self._clean_up_crds,
            args=(router,),
            name=f"apiserver-{self.port}-crd-finalizer",
            daemon=True,
        )
        self._cleaner.start()
        return self

    def _clean_up_crds(self, router: Router) -> None:
        """apiextensions-apiserver's CRD finalizer controller, woken by every write."""
        seen = 0
        while not self._stopping():
            if self.store.wait_for_change(seen, 0.5):
                seen = self.store.resource_version
            try:
                router.handlers.clean_up_deleted_crds()
            except Exception:  # a bug here must not stop the server; the next write retries
                log.exception("CRD cleanup failed")

    def _stopping(self) -> bool:
        return self._httpd is None or self._httpd.stopping.is_set()

    def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.stopping.set()
        self.store.close()
        self.flow_control.close()
        httpd.shutdown()
        httpd.close_connections()
        httpd.server_close()  # joins the request threads
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if self._cleaner is not None:
            self._cleaner.join(timeout=5)
            self._cleaner = None
        # a stopped server can be started again with its data
        self.store = _reopen(self.store)

    def __enter__(self) -> ApiServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def write_kubeconfig(
        self,
        path: str | Path,
        namespace: str = "default",
        name: str = "nodewright-sandbox",
        token: str | None = None,
    ) -> Path:
        """A kubeconfig with this server and a bearer token (the administrator's unless ``token``).

        It points at the HTTPS side with the CA inline: kubectl (clientcmd) drops a kubeconfig's
        credentials on a plain-HTTP server, so a token only works over TLS.
        """
        if self._cert is None:
            raise RuntimeError(
                "start() the server before writing a kubeconfig: its port and CA are made at start"
            )
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        cluster = {"server": self.https_url, "certificate-authority-data": self._cert.ca_data}
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": name, "cluster": cluster}],
            "users": [{"name": name, "user": {"token": token or self.token}}],
            "contexts": [{"name": name, "context": {"cluster": name, "user": name, "namespace": namespace}}],
            "current-context": name,
            "preferences": {},
        }
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        path.chmod(0o600)
        return path


def _reopen(store: Store) -> Store:
    """Keep the data of a stopped server; only the 'closed' flag that ended its watches is reset."""
    store._closed = False
    return store
