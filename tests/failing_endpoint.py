"""An AWS endpoint that takes every request and answers 500, counting them: how many attempts a
botocore client's retry configuration really makes (its ``max_attempts`` counts retries, not
attempts; ``total_max_attempts`` counts attempts)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FailingEndpoint:
    def __init__(self, url: str) -> None:
        self.url = url
        self.requests = 0


@contextmanager
def failing_endpoint() -> Iterator[FailingEndpoint]:
    endpoint = FailingEndpoint("")

    class Failing(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            endpoint.requests += 1
            body = b'{"__type":"InternalException","message":"taken, then failed"}'
            self.send_response(500)
            self.send_header("Content-Type", "application/x-amz-json-1.1")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Failing)
    endpoint.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield endpoint
    finally:
        server.shutdown()
        server.server_close()
