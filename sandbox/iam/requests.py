"""An AWS API request as the service receives it: who signed it, which operation, its parameters.

The signer is the SigV4 ``Authorization`` header's access key id (its credential scope also
names the region and the signing service). The operation and its parameters are read with
botocore's own service models: the query protocols (EC2, IAM, STS) through moto's request
parsers, the JSON protocols from ``X-Amz-Target`` and the body, the REST protocols (EKS, Lambda)
by matching the request against each operation's ``requestUri``.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any
from urllib.parse import parse_qs, unquote

_CREDENTIAL = re.compile(r"Credential=([^/,\s]+)/\d{8}/([^/]+)/([^/]+)/aws4_request")
# SigV4 signing names that differ from botocore's service name.
SERVICE_OF_SIGNING_NAME = {"execute-api": "apigateway"}


@dataclass(frozen=True)
class Signature:
    access_key_id: str
    region: str
    service: str  # botocore's service name


@dataclass(frozen=True)
class ParsedRequest:
    service: str
    protocol: str
    operation: str
    params: Mapping[str, Any]


class UnparsableRequest(ValueError):
    """The request names no operation the service model knows."""


def signature(authorization: str) -> Signature | None:
    found = _CREDENTIAL.search(authorization or "")
    if found is None:
        return None
    key, region, signing = found.groups()
    return Signature(key, region, SERVICE_OF_SIGNING_NAME.get(signing, signing))


@cache
def service_model(service: str) -> Any:
    import botocore.session

    return botocore.session.get_session().get_service_model(service)


@cache
def _routes(service: str) -> list[tuple[str, re.Pattern[str], str]]:
    """(method, path pattern, operation) of a REST service, most specific first."""
    model = service_model(service)
    routes = []
    for name in model.operation_names:
        http = model.operation_model(name).http
        path = http["requestUri"].split("?", 1)[0]
        pattern = "".join(
            f"(?P<{piece[1:-1].rstrip('+')}>{'.+' if piece.endswith('+}') else '[^/]+'})"
            if piece.startswith("{")
            else re.escape(piece)
            for piece in re.split(r"(\{\w+\+?\})", path)
        )
        routes.append((http["method"], re.compile(f"^{pattern}/?$"), name))
    return sorted(routes, key=lambda r: -len(r[1].pattern))


def parse(
    service: str,
    method: str,
    path: str,
    *,
    query: str,
    headers: Mapping[str, str],
    body: bytes,
    environ: Mapping[str, Any] | None = None,
) -> ParsedRequest:
    model = service_model(service)
    protocol = model.protocol
    if protocol in ("ec2", "query"):
        form = parse_qs(body.decode() if body else query, keep_blank_values=True)
        action = (form.get("Action") or [""])[0]
        if not action or action not in model.operation_names:
            raise UnparsableRequest(f"{service}: no operation {action!r}")
        return ParsedRequest(
            service, protocol, action, _query_params(service, protocol, action, environ, body)
        )
    if protocol == "json":
        target = headers.get("X-Amz-Target") or headers.get("x-amz-target") or ""
        operation = target.rsplit(".", 1)[-1]
        if operation not in model.operation_names:
            raise UnparsableRequest(f"{service}: no operation {target!r}")
        return ParsedRequest(service, protocol, operation, json.loads(body or b"{}"))
    if protocol in ("rest-json", "rest-xml"):
        for route_method, pattern, operation in _routes(service):
            found = pattern.match(path)
            if route_method == method and found:
                params: dict[str, Any] = {k: unquote(v) for k, v in found.groupdict().items()}
                shape = model.operation_model(operation).input_shape
                members = shape.members if shape is not None else {}
                for key, values in parse_qs(query).items():
                    for member, member_shape in members.items():
                        if member_shape.serialization.get("location") == "querystring" and (
                            member_shape.serialization.get("name") == key
                        ):
                            params[member] = values[0]
                if body and protocol == "rest-json" and not _has_payload_blob(shape):
                    with contextlib.suppress(ValueError):
                        params.update(json.loads(body))
                return ParsedRequest(service, protocol, operation, params)
        raise UnparsableRequest(f"{service}: no operation for {method} {path}")
    raise UnparsableRequest(f"{service}: protocol {protocol} is not parsed")


def _has_payload_blob(shape: Any) -> bool:
    payload = shape.serialization.get("payload") if shape is not None else None
    return bool(payload) and shape.members[payload].type_name == "blob"


def _query_params(
    service: str, protocol: str, action: str, environ: Mapping[str, Any] | None, body: bytes
) -> Any:
    """The parameters of a query-protocol request, parsed as moto parses them (botocore's model)."""
    import io

    from moto.core.parse import PROTOCOL_PARSERS
    from werkzeug.wrappers import Request

    copy = dict(environ or {})
    copy["wsgi.input"] = io.BytesIO(body)
    request = Request(copy)
    from moto.core.utils import get_service_model

    parser = PROTOCOL_PARSERS[protocol](get_service_model(service).operation_model(action))
    return parser.parse(
        {
            "method": request.method,
            "values": request.values,
            "headers": request.headers,
            "body": body,
            "url_path": request.path,
            "url_params": {},
        }
    )
