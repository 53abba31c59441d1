"""The wake-up path as the stack deploys it (infra/capabilities/wakeup.py), for the sandbox runtime.

* :class:`FunctionUrl`: the webhook function's URL, HTTPS on 127.0.0.1 with a throw-away CA (a real
  function URL has a publicly trusted certificate, so only the sandbox's configuration carries a
  ``caBundle``). Each request becomes a function URL event (payload version 2.0) and a synchronous
  invocation of ``webhook`` in a free container: up to ``WEBHOOK_CONCURRENCY`` containers (the
  function's reserved concurrency), a new one starting cold; with every one busy the request is
  throttled (429), as Lambda throttles a function URL. A body over Lambda's 6 MB request limit is
  refused with 413 before it.
* :class:`LoadBalancer`: ``-c wakeup=private``'s internal load balancer in front of the same
  containers: HTTPS with the certificate the stack makes (``nodewright.wakeup.certificate``, for the
  load balancer's name, here ``localhost``; imported into moto's ACM, where the stack's custom
  resource puts it, and read back from there as ``install-webhooks`` does for the ``caBundle``), the
  listener rule (only ``POST`` on ``/*/admit`` and ``/*/convert`` reaches the function, anything
  else is the load balancer's own 404), the load balancer's Lambda event and answer shape, and its
  1 MB limits on a Lambda target's request body (413) and answer (502). Not modelled: security
  groups and routing (everything is 127.0.0.1), and the certificate is imported by the sandbox,
  not by the custom resource's function under its role.
* :class:`LambdaApi`: Lambda's Invoke API on 127.0.0.1 (the webhook's ``AWS_ENDPOINT_URL_LAMBDA``),
  for the provisioner's ``wakeup`` alias only: an asynchronous invocation (``Event``) is accepted
  with 202 and queued; a throttled one (the provisioner's one container is busy: reserved
  concurrency 1) waits and is retried until ``WAKEUP_MAX_EVENT_AGE_SECONDS``, then dropped, never
  retried after it ran (``WAKEUP_RETRY_ATTEMPTS`` 0), as Lambda's event queue does for that alias.
  In a runtime without the provisioner (a benchmark of the webhook alone) a wake-up is accepted,
  counted and not delivered.
* :class:`BlackHole`: a URL that accepts connections and never answers (a private control plane
  without egress, a firewall dropping packets): what a webhook configuration points at when its
  function URL is unreachable.
* :func:`install`: the per-stack secret in Secrets Manager (moto), the two servers, and what
  ``nodewright install-webhooks --apply`` applies (the ValidatingWebhookConfiguration, and the
  NodePool and EC2NodeClass CRDs serving v1beta1 through the conversion webhook), applied to the
  emulator.
"""

from __future__ import annotations

import base64
import contextlib
import json
import secrets
import socket
import ssl
import string
import threading
import time
import urllib.parse
import uuid
from collections import Counter, deque
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from nodewright.spec import deployment

from sandbox.runtime.stack import Invocation, Trigger, Worker

if TYPE_CHECKING:
    from sandbox.runtime.stack import Runtime

# Lambda's synchronous request payload limit.
MAX_REQUEST_BYTES = 6 * 1024 * 1024
ACCOUNT = "123456789012"
SECRET_ALPHABET = string.ascii_letters + string.digits


class _QuietServer(ThreadingHTTPServer):
    """Keeps its open connections (kept alive between requests), so that closing it closes them:
    a URL that went away answers nothing, not even on a connection opened before."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.connections: set[Any] = set()
        self.connections_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.connections_lock:
            self.connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.connections_lock:
            self.connections.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        with self.connections_lock:
            connections, self.connections = list(self.connections), set()
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                connection.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A caller that hangs up or fails the TLS handshake is its own business (no traceback)."""


class _Server:
    """A ThreadingHTTPServer in a daemon thread, with its own handler class."""

    def __init__(self, handler: type[BaseHTTPRequestHandler], context: Any = None) -> None:
        self.httpd = _QuietServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        if context is not None:
            self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="sandbox-http", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.httpd.close_connections()
        self._thread.join(timeout=5)


def _answer(handler: BaseHTTPRequestHandler, status: int, body: bytes, headers: dict[str, str]) -> None:
    try:
        handler.send_response(status)
        for key, value in headers.items():
            handler.send_header(key, value)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)
    except (OSError, ssl.SSLError):  # the caller gave up first (the API server's timeoutSeconds)
        pass


class FunctionUrl(Trigger):
    """``https://127.0.0.1:<port>/`` in front of the ``webhook`` function's containers."""

    FUNCTION = "webhook"

    def __init__(self) -> None:
        from sandbox.apiserver.tls import make_serving_cert

        self.cert = make_serving_cert("127.0.0.1")
        self.runtime: Runtime | None = None
        self._server: _Server | None = None
        self.url = ""
        self._extra: list[Worker] = []  # containers beyond the runtime's own one
        self._pool_lock = threading.Lock()
        self.throttled = 0
        # Requests by the path's last segment (admit, convert, ...; never the secret before it).
        self.requests: Counter[str] = Counter()
        # What each admission call was about: (operation, kind, name, reason, reporting controller).
        self.admitted: list[tuple[str, str, str, str, str]] = []

    def start(self, runtime: Runtime) -> None:
        self.runtime = runtime
        trigger = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as a function URL's endpoint
            # The answer's headers and body are two writes: with Nagle's algorithm the body waits
            # for the caller's delayed ACK (40 ms a call) on a kept-alive connection.
            disable_nagle_algorithm = True

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length > MAX_REQUEST_BYTES:
                    self.close_connection = True  # the body is not read: the connection cannot go on
                    _answer(self, 413, b'{"Message":"Request must be smaller than 6291456 bytes"}', {})
                    return
                body = self.rfile.read(length) if length else b""
                status, headers, answer = trigger.invoke(self.command, self.path, dict(self.headers), body)
                _answer(self, status, answer, headers)

            do_GET = do_POST = do_PUT = do_DELETE = _serve

            def log_message(self, *args: Any) -> None:  # the path holds the secret: never logged
                pass

        self._server = _Server(Handler, self.cert.context)
        self.url = f"https://127.0.0.1:{self._server.port}/"

    def invoke(
        self, method: str, raw: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        """One request to the URL: (status, headers, body) as the function URL answers it."""
        assert self.runtime is not None
        action = raw.partition("?")[0].rstrip("/").rsplit("/", 1)[-1]
        self.requests[action] += 1
        if action == "admit":
            self.admitted.append(_reviewed(body))
        return self._answer_of(self._invoke(self.to_event(method, raw, headers, body)))

    def to_event(self, method: str, raw: str, headers: dict[str, str], body: bytes) -> dict[str, Any]:
        """The function URL event (payload version 2.0) of a request."""
        path, _, query = raw.partition("?")
        now = datetime.now(UTC)
        text = body.decode("utf-8", errors="replace")
        return {
            "version": "2.0",
            "routeKey": "$default",
            "rawPath": path,
            "rawQueryString": query,
            "headers": {k.lower(): v for k, v in headers.items()},
            "requestContext": {
                "accountId": "anonymous",
                "apiId": "sandbox",
                "domainName": f"127.0.0.1:{self._server.port if self._server else 0}",
                "http": {
                    "method": method,
                    "path": path,
                    "protocol": "HTTP/1.1",
                    "sourceIp": "127.0.0.1",
                    "userAgent": headers.get("User-Agent", ""),
                },
                "requestId": str(uuid.uuid4()),
                "routeKey": "$default",
                "stage": "$default",
                "time": now.strftime("%d/%b/%Y:%H:%M:%S +0000"),
                "timeEpoch": int(now.timestamp() * 1000),
            },
            "body": text,
            "isBase64Encoded": False,
        }

    def _answer_of(self, done: Invocation | None) -> tuple[int, dict[str, str], bytes]:
        assert self.runtime is not None
        if done is None:
            self.throttled += 1
            return 429, {"Content-Type": "application/json"}, b'{"Message":"Rate Exceeded."}'
        self.runtime.record(done)
        if not done.ok or not isinstance(done.result, dict):
            return 502, {"Content-Type": "application/json"}, b'{"Message":"Internal Server Error"}'
        result = done.result
        raw_body = result.get("body") or ""
        payload = base64.b64decode(raw_body) if result.get("isBase64Encoded") else str(raw_body).encode()
        return int(result.get("statusCode", 200)), dict(result.get("headers") or {}), payload

    def _invoke(self, event: dict[str, Any]) -> Invocation | None:
        """The invocation in a free container (a new one, cold, while fewer than the reserved
        concurrency run); None when every container is busy: throttled."""
        assert self.runtime is not None
        for worker in self._containers():
            done = worker.invoke(event, blocking=False)
            if done is not None:
                return done
        with self._pool_lock:
            if 1 + len(self._extra) >= deployment.WEBHOOK_CONCURRENCY:
                return None
            runtime = self.runtime
            worker = Worker(
                deployment.FUNCTIONS[self.FUNCTION],
                runtime.function_env(self.FUNCTION),
                runtime.logs_dir / f"{self.FUNCTION}.log",
                f"nodewright-{self.FUNCTION}",
            )
            self._extra.append(worker)
        return worker.invoke(event, blocking=False)

    def _containers(self) -> list[Worker]:
        assert self.runtime is not None
        with self._pool_lock:
            return [self.runtime.worker(self.FUNCTION), *self._extra]

    def warm(self, containers: int = 1) -> None:
        """Start ``containers`` containers and let each serve a request (imports, secret): the
        stack has been deployed all along, so its containers are warm, as after any earlier call.
        A cold one (a loaded machine) can outlast the API server's timeout."""
        assert self.runtime is not None
        probe = self.to_event("GET", "/", {}, b"")
        while len(self._containers()) < min(containers, deployment.WEBHOOK_CONCURRENCY):
            with self._pool_lock:
                runtime = self.runtime
                self._extra.append(
                    Worker(
                        deployment.FUNCTIONS[self.FUNCTION],
                        runtime.function_env(self.FUNCTION),
                        runtime.logs_dir / f"{self.FUNCTION}.log",
                        f"nodewright-{self.FUNCTION}",
                    )
                )
        for worker in self._containers()[:containers]:
            worker.invoke(probe)

    def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        with self._pool_lock:
            extra, self._extra = self._extra, []
        for worker in extra:
            worker.stop()


class LoadBalancer(FunctionUrl):
    """``https://localhost:<port>/``: the private wake-up's internal Application Load Balancer in front
    of the ``webhook`` function's containers (see the module docstring)."""

    NAME = "localhost"  # the load balancer's DNS name here: what the certificate names
    # A Lambda target's limits (Elastic Load Balancing user guide, "Lambda functions as targets").
    MAX_BODY_BYTES = 1024 * 1024
    MAX_ANSWER_BYTES = 1024 * 1024
    FORWARDED = ("admit", "convert")  # the listener rule's path patterns /*/admit, /*/convert

    def __init__(self, cluster_name: str) -> None:
        from nodewright.wakeup.certificate import self_signed

        super().__init__()
        made = self_signed(self.NAME, cluster_name)
        self.certificate, self._private_key = made.certificate, made.private_key
        self.certificate_arn = ""

    def start(self, runtime: Runtime) -> None:
        import tempfile
        from pathlib import Path

        from sandbox.apiserver.tls import ServingCert

        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2  # the listener's TLS 1.2/1.3 policy
        with tempfile.TemporaryDirectory() as folder:
            cert, key = Path(folder) / "tls.crt", Path(folder) / "tls.key"
            cert.write_text(self.certificate)
            key.write_text(self._private_key)
            context.load_cert_chain(cert, key)
        self.cert = ServingCert(self.certificate.encode(), context)
        super().start(runtime)
        assert self._server is not None
        self.url = f"https://{self.NAME}:{self._server.port}/"

    def invoke(
        self, method: str, raw: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        """The listener: its rule forwards POST on /*/admit and /*/convert; anything else is its own
        404 (nothing invoked); a body over a Lambda target's 1 MB is refused."""
        path = raw.partition("?")[0]
        segments = path.split("/")
        if method != "POST" or len(segments) != 3 or segments[2] not in self.FORWARDED:
            return 404, {"Content-Type": "text/plain"}, b"Not Found"
        if len(body) > self.MAX_BODY_BYTES:
            return (
                413,
                {"Content-Type": "text/html"},
                b"<html><body><h1>413 Request Entity Too Large</h1></body></html>",
            )
        return super().invoke(method, raw, headers, body)

    def to_event(self, method: str, raw: str, headers: dict[str, str], body: bytes) -> dict[str, Any]:
        """What the load balancer sends a Lambda target: the body as text for a text content type,
        base64 otherwise."""
        path, _, query = raw.partition("?")
        text_like = (headers.get("Content-Type") or headers.get("content-type") or "").startswith(
            ("application/json", "text/")
        )
        return {
            "requestContext": {
                "elb": {
                    "targetGroupArn": f"arn:aws:elasticloadbalancing:us-east-1:{ACCOUNT}:targetgroup/"
                    "nodewright-wakeup-sandbox/0123456789abcdef"
                }
            },
            "httpMethod": method,
            "path": path,
            "queryStringParameters": dict(urllib.parse.parse_qsl(query, keep_blank_values=True)),
            "headers": {k.lower(): v for k, v in headers.items()},
            "body": body.decode("utf-8", errors="replace") if text_like else base64.b64encode(body).decode(),
            "isBase64Encoded": not text_like,
        }

    def _answer_of(self, done: Invocation | None) -> tuple[int, dict[str, str], bytes]:
        result = done.result if done is not None and done.ok else None
        if isinstance(result, dict) and (
            len(json.dumps(result)) > self.MAX_ANSWER_BYTES or "statusCode" not in result
        ):
            assert self.runtime is not None
            assert done is not None
            self.runtime.record(done)
            return 502, {"Content-Type": "text/html"}, b"<html><body><h1>502 Bad Gateway</h1></body></html>"
        return super()._answer_of(done)


class BlackHole(Trigger):
    """``https://127.0.0.1:<port>/``: accepts every connection and never answers, not even the TLS
    handshake (a caller waits for its own timeout). ``connections`` counts the callers."""

    def __init__(self) -> None:
        self._socket = socket.create_server(("127.0.0.1", 0), backlog=1024)
        self._held: list[Any] = []
        self._stop = threading.Event()
        self.connections = 0
        self.url = f"https://127.0.0.1:{self._socket.getsockname()[1]}/"
        self._thread = threading.Thread(target=self._accept, name="black-hole", daemon=True)

    def start(self, runtime: Runtime | None = None) -> None:
        self._thread.start()

    def _accept(self) -> None:
        self._socket.settimeout(0.2)
        while not self._stop.is_set():
            try:
                connection, _ = self._socket.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            self._held.append(connection)  # never read, never written, closed at stop

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        for connection in self._held:
            connection.close()
        self._socket.close()


class LambdaApi(Trigger):
    """Lambda's Invoke API for the provisioner's ``wakeup`` alias: asynchronous invocations only."""

    def __init__(self, function: str = "provisioner", alias: str = "wakeup") -> None:
        self.function = function
        self.alias = alias
        self.runtime: Runtime | None = None
        self._server: _Server | None = None
        self._queue: deque[tuple[float, dict[str, Any]]] = deque()
        self._wake = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.endpoint = ""
        self.accepted = 0
        self.delivered = 0
        self.expired = 0
        self.undelivered = 0  # accepted by a runtime without the function

    def function_name(self, runtime: Runtime) -> str:
        """The alias ARN the stack gives the webhook as WAKE_FUNCTION."""
        name = f"nodewright-{self.function.replace('_', '-')}"
        return f"arn:aws:lambda:{runtime.region}:{ACCOUNT}:function:{name}:{self.alias}"

    def start(self, runtime: Runtime) -> None:
        self.runtime = runtime
        trigger = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                path, _, query = self.path.partition("?")
                # The caller's role is held to its IAM policy (lambda:InvokeFunction), as in AWS.
                denied = runtime.sandbox.iam.check(
                    "POST", path, query=query, headers=dict(self.headers), body=body
                )
                if denied is not None:
                    _answer(self, int(denied[0].split()[0]), denied[2], dict(denied[1]))
                    return
                status, answer = trigger.accept(self.path, self.headers.get("X-Amz-Invocation-Type"), body)
                _answer(self, status, answer, {"Content-Type": "application/json"})

            def log_message(self, *args: Any) -> None:
                pass

        self._server = _Server(Handler)
        self.endpoint = f"http://127.0.0.1:{self._server.port}"
        self._thread = threading.Thread(target=self._deliver, name="lambda-async-queue", daemon=True)
        self._thread.start()

    def accept(self, path: str, invocation_type: str | None, body: bytes) -> tuple[int, bytes]:
        assert self.runtime is not None
        parts = path.split("/")
        if (
            len(parts) != 5
            or parts[1] != "2015-03-31"
            or parts[2] != "functions"
            or parts[4] != "invocations"
        ):
            return 404, b'{"Message":"not an Invoke request"}'
        if urllib.parse.unquote(parts[3]) != self.function_name(self.runtime):
            return 404, b'{"Type":"User","Message":"Function not found"}'
        if invocation_type != "Event":
            return 400, b'{"Message":"the sandbox serves asynchronous invocations (Event) only"}'
        try:
            event = json.loads(body or b"{}")
        except ValueError:
            return 400, b'{"Type":"User","Message":"Could not parse request body into json"}'
        with self._wake:
            self._queue.append((time.monotonic(), event))
            self.accepted += 1
            self._wake.notify()
        return 202, b""

    @property
    def in_flight(self) -> int:
        """Wake-ups accepted and not yet over: queued, or their invocation still running."""
        with self._wake:
            return self.accepted - self.delivered - self.expired - self.undelivered

    def _deliver(self) -> None:
        """Lambda's event queue: in order, retried while throttled, dropped once too old."""
        assert self.runtime is not None
        runtime = self.runtime
        while not self._stop.is_set():
            with self._wake:
                while not self._queue and not self._stop.is_set():
                    self._wake.wait(0.5)
                if self._stop.is_set():
                    return
                queued_at, event = self._queue[0]
            if self.function not in runtime.function_names:  # nothing to deliver to: counted only
                with self._wake:
                    self._queue.popleft()
                    self.undelivered += 1
                continue
            if time.monotonic() - queued_at > deployment.WAKEUP_MAX_EVENT_AGE_SECONDS:
                with self._wake:
                    self._queue.popleft()
                    self.expired += 1
                runtime.say(self.function, "wake-up dropped: older than the alias's maximum event age")
                continue
            done = runtime.worker(self.function).invoke(event, blocking=False)
            if done is None:  # throttled: reserved concurrency 1 and the container is busy
                self._stop.wait(0.1)
                continue
            with self._wake:
                self._queue.popleft()
                self.delivered += 1
            runtime.record(done)

    def halt(self) -> None:
        self._stop.set()
        with self._wake:
            self._wake.notify_all()

    def stop(self) -> None:
        self.halt()
        if self._thread is not None:
            self._thread.join(timeout=60)
        if self._server is not None:
            self._server.close()
            self._server = None


def make_secret() -> str:
    """What the stack's Secrets Manager generator makes: 48 letters and digits."""
    return "".join(secrets.choice(SECRET_ALPHABET) for _ in range(48))


def install(runtime: Runtime, mode: str = "public") -> tuple[FunctionUrl, LambdaApi]:
    """Start the function URL (``mode`` "private": the internal load balancer, its certificate in
    moto's ACM) and the Invoke API, store the secret, and register the webhook configuration with
    the emulator as ``install-webhooks --apply`` does; returns the two triggers (the runtime stops
    them)."""
    from nodewright.api import webhooks
    from nodewright.cluster import install as install_module
    from nodewright.cluster.resources import CRDS, VALIDATING_WEBHOOKS

    sandbox = runtime.sandbox
    secrets_client = sandbox.aws_client("secretsmanager")
    try:
        secret = make_secret()
        arn = secrets_client.create_secret(
            Name=f"nodewright-{runtime.cluster_name}-webhook-path-{uuid.uuid4().hex[:6]}", SecretString=secret
        )["ARN"]
    finally:
        secrets_client.close()
    lambda_api = LambdaApi()
    lambda_api.start(runtime)
    url = LoadBalancer(runtime.cluster_name) if mode == "private" else FunctionUrl()
    runtime.function_envs["webhook"] = {
        "WAKE_FUNCTION": lambda_api.function_name(runtime),
        "WEBHOOK_SECRET_ARN": arn,
        "AWS_ENDPOINT_URL_LAMBDA": lambda_api.endpoint,
    }
    url.start(runtime)
    # A function URL's certificate is publicly trusted; the sandbox's stand-in's is not.
    ca_bundle = _imported_certificate(runtime, url) if isinstance(url, LoadBalancer) else url.cert.ca_data
    documents = webhooks.install_documents(
        webhooks.endpoint(url.url, secret, webhooks.ADMIT_PATH),
        webhooks.endpoint(url.url, secret, webhooks.CONVERT_PATH),
        ca_bundle,
    )
    admin = sandbox.admin_cluster()
    resources = {r.kind: r for r in (CRDS, VALIDATING_WEBHOOKS)}
    for document in documents:
        install_module.apply(admin, resources[document["kind"]], document)
    url.warm()
    return url, lambda_api


def _reviewed(body: bytes) -> tuple[str, str, str, str, str]:
    """(operation, kind, name, reason, reporting controller) of the object an AdmissionReview is
    about ("" where the body does not say): what a test checks the API server called out for."""
    try:
        request = json.loads(body).get("request") or {}
    except (ValueError, AttributeError):
        return ("", "", "", "", "")
    obj = request.get("object") or {}
    reporting = obj.get("reportingController") or (obj.get("source") or {}).get("component") or ""
    return (
        str(request.get("operation") or ""),
        str(obj.get("kind") or ""),
        str((obj.get("metadata") or {}).get("name") or ""),
        str(obj.get("reason") or ""),
        str(reporting),
    )


def _imported_certificate(runtime: Runtime, balancer: LoadBalancer) -> str:
    """Import the load balancer's certificate into ACM as the stack's custom resource does, and read
    it back as ``install-webhooks`` does: the ``caBundle`` (base64 PEM)."""
    from nodewright.spec.iam import certificate_tags

    acm = runtime.sandbox.aws_client("acm")
    try:
        balancer.certificate_arn = acm.import_certificate(
            Certificate=balancer.certificate.encode(),
            PrivateKey=balancer._private_key.encode(),
            Tags=[{"Key": k, "Value": v} for k, v in certificate_tags(runtime.cluster_name).items()],
        )["CertificateArn"]
        pem = str(acm.get_certificate(CertificateArn=balancer.certificate_arn)["Certificate"])
    finally:
        acm.close()
    return base64.b64encode(pem.encode()).decode()
