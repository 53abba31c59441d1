"""A denied request answered as the service answers it, so the product's own error handling runs.

* EC2: HTTP 403 ``UnauthorizedOperation``, "You are not authorized to perform this operation.
  User: … is not authorized to perform: ec2:CreateFleet on resource: arn:… because no
  identity-based policy allows the ec2:CreateFleet action. Encoded authorization failure
  message: …" (the encoded part: what ``sts:DecodeAuthorizationMessage`` would give, base64).
* Query protocol (IAM, STS): HTTP 403 ``AccessDenied`` in an ``ErrorResponse``.
* JSON protocol: HTTP 400 ``AccessDeniedException`` (DynamoDB, SSM, Secrets Manager); SQS, whose
  JSON protocol keeps its query-era codes, answers 403 with ``x-amzn-query-error:
  AccessDenied;Sender`` and names the action in lower case ("sqs:receivemessage").
* REST-JSON (EKS, Lambda): HTTP 403 ``AccessDeniedException`` (``x-amzn-ErrorType``).

A call the sandbox cannot authorize (no model) is denied in the same shape, its message saying so
and where to add the model. An unknown access key is refused as AWS refuses one.
"""

from __future__ import annotations

import base64
import json
import uuid
from typing import TYPE_CHECKING, Any
from xml.sax.saxutils import escape

from sandbox.iam.authorization import Call, shown

if TYPE_CHECKING:
    from sandbox.iam.enforcement import Verdict
    from sandbox.iam.evaluator import Request

Answer = tuple[str, list[tuple[str, str]], bytes]
_STATUS = {400: "400 Bad Request", 401: "401 Unauthorized", 403: "403 Forbidden"}
# JSON-protocol services whose AccessDeniedException is HTTP 400 (the others: 403).
_JSON_400 = {"dynamodb", "ssm", "secretsmanager", "events", "kms", "logs", "pricing"}


def message(principal: str, call: Call, request: Request | None, reason: str, detail: str = "") -> str:
    """The denial's message as AWS words it (IAM's wording for implicit and explicit denies)."""
    if request is None:
        return f"User: {principal} is not authorized to perform: {call.label}: {detail}"
    action = request.action.lower() if call.service == "sqs" else request.action
    resource = shown(request.resource)
    if reason == "ExplicitlyDenied":
        why = "with an explicit deny in an identity-based policy"
    elif reason == "Error":
        why = f"because the sandbox could not evaluate the request ({detail})"
    else:
        why = f"because no identity-based policy allows the {action} action"
    return f"User: {principal} is not authorized to perform: {action} on resource: {resource} {why}"


def _encoded(principal: str, request: Request | None, reason: str) -> str:
    """What sts:DecodeAuthorizationMessage would return for it, base64url-encoded."""
    decoded = {
        "allowed": False,
        "explicitDeny": reason == "ExplicitlyDenied",
        "context": {
            "principal": {"arn": principal},
            "action": request.action if request else "",
            "resource": shown(request.resource) if request else "",
            "conditions": {
                "items": [
                    {"key": k, "values": {"items": [{"value": str(v)}]}}
                    for k, v in (request.context.items() if request else [])
                ]
            },
        },
    }
    return base64.urlsafe_b64encode(json.dumps(decoded).encode()).decode().rstrip("=")


def answer(service: str, protocol: str, principal: str, call: Call, verdict: Verdict) -> Answer:
    text = message(principal, call, verdict.denied, verdict.reason, verdict.detail)
    request_id = str(uuid.uuid4())
    if protocol == "ec2":
        full = (
            f"You are not authorized to perform this operation. {text}. Encoded authorization failure "
            f"message: {_encoded(principal, verdict.denied, verdict.reason)}"
        )
        body = (
            '<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error>'
            f"<Code>UnauthorizedOperation</Code><Message>{escape(full)}</Message></Error></Errors>"
            f"<RequestID>{request_id}</RequestID></Response>"
        )
        return _STATUS[403], [("Content-Type", "text/xml;charset=UTF-8")], body.encode()
    if protocol == "query":
        return _query_error(service, 403, "AccessDenied", text, request_id)
    if protocol == "json":
        if service == "sqs":
            headers = [
                ("Content-Type", "application/x-amz-json-1.0"),
                ("x-amzn-query-error", "AccessDenied;Sender"),
            ]
            body_json = {"__type": "com.amazon.coral.service#AccessDeniedException", "message": text}
            return _STATUS[403], [*headers, ("x-amzn-RequestId", request_id)], json.dumps(body_json).encode()
        status = 400 if service in _JSON_400 else 403
        body_json = {"__type": "com.amazon.coral.service#AccessDeniedException", "Message": text}
        return (
            _STATUS[status],
            [("Content-Type", "application/x-amz-json-1.1"), ("x-amzn-RequestId", request_id)],
            json.dumps(body_json).encode(),
        )
    body_json = {"message": text} if service != "lambda" else {"Type": "User", "Message": text}
    headers = [
        ("Content-Type", "application/json"),
        ("x-amzn-ErrorType", "AccessDeniedException"),
        ("x-amzn-RequestId", request_id),
    ]
    return _STATUS[403], headers, json.dumps(body_json).encode()


def _query_error(service: str, status: int, code: str, text: str, request_id: str) -> Answer:
    namespace = {
        "iam": "https://iam.amazonaws.com/doc/2010-05-08/",
        "sts": "https://sts.amazonaws.com/doc/2011-06-15/",
    }
    body = (
        f'<ErrorResponse xmlns="{namespace.get(service, "")}"><Error><Type>Sender</Type><Code>{code}</Code>'
        f"<Message>{escape(text)}</Message></Error><RequestId>{request_id}</RequestId></ErrorResponse>"
    )
    return _STATUS[status], [("Content-Type", "text/xml")], body.encode()


def unknown_identity(service: str, access_key_id: str | None) -> Answer:
    """AWS's answer to credentials it does not know (or none), with what to do in the sandbox."""
    hint = (
        " (sandbox: this key is no identity of the running sandbox; a function signs with its own role's "
        "keys: Sandbox.env(function=NAME) or Sandbox.credentials(NAME); the sandbox's own clients "
        "come from sandbox.aws.server.aws_client)"
    )
    request_id = str(uuid.uuid4())
    if access_key_id is None:
        code, text = "MissingAuthenticationToken", "Request is missing Authentication Token"
    elif service == "ec2":
        code, text = "AuthFailure", "AWS was not able to validate the provided access credentials"
    elif service in ("iam", "sts"):
        code, text = "InvalidClientTokenId", "The security token included in the request is invalid."
    else:
        code, text = "UnrecognizedClientException", "The security token included in the request is invalid."
    text += hint
    if service == "ec2":
        body = (
            '<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error>'
            f"<Code>{code}</Code><Message>{escape(text)}</Message></Error></Errors>"
            f"<RequestID>{request_id}</RequestID></Response>"
        )
        return _STATUS[401], [("Content-Type", "text/xml;charset=UTF-8")], body.encode()
    if service in ("iam", "sts"):
        return _query_error(service, 403, code, text, request_id)
    body_json: dict[str, Any] = {"__type": code, "message": text}
    return (
        _STATUS[403 if service not in _JSON_400 else 400],
        [("Content-Type", "application/x-amz-json-1.1"), ("x-amzn-ErrorType", code)],
        json.dumps(body_json).encode(),
    )
