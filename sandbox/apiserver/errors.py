"""API errors rendered as the ``Status`` bodies kube-apiserver returns.

Clients (the kubernetes Python client, kubectl) branch on ``code`` and ``reason`` and show ``message``
to users, so every field mirrors k8s.io/apimachinery/pkg/api/errors.
"""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """An error answered as a ``Status`` body (or as plain text when ``plain`` is set)."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: dict[str, Any] | None = None,
        *,
        plain: bool = False,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.plain = plain
        self.headers = headers or {}
        self.warnings: list[str] = []  # recorded before the error: sent with it as Warning headers

    def status(self) -> dict[str, Any]:
        """The ``Status`` object, as the API server serialises it (details omitted when empty)."""
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if not self.reason:
            del body["reason"]  # metav1.Status reason is omitempty: an error the server did not classify
        if self.details is not None:
            body["details"] = self.details
        return body


def _details(name: str, group: str, kind: str, **extra: Any) -> dict[str, Any]:
    details: dict[str, Any] = {}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    if kind:
        details["kind"] = kind
    details.update({k: v for k, v in extra.items() if v is not None})
    return details


def qualified(resource: str, group: str) -> str:
    """``pods`` for the core group, ``leases.coordination.k8s.io`` otherwise (as in messages)."""
    return f"{resource}.{group}" if group else resource


def not_found(resource: str, group: str, name: str) -> ApiError:
    return ApiError(
        404, "NotFound", f'{qualified(resource, group)} "{name}" not found', _details(name, group, resource)
    )


def already_exists(resource: str, group: str, name: str) -> ApiError:
    return ApiError(
        409,
        "AlreadyExists",
        f'{qualified(resource, group)} "{name}" already exists',
        _details(name, group, resource),
    )


def conflict(resource: str, group: str, name: str, why: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified(resource, group)} "{name}": {why}',
        _details(name, group, resource),
    )


def storage_key(resource: str, group: str, namespace: str, name: str, *, custom: bool) -> str:
    """The etcd key kube-apiserver names in a storage error: ``/registry/<resource>/<ns>/<name>`` for
    built-ins (services live under ``services/specs``), ``/registry/<group>/<resource>/...`` for
    custom resources."""
    prefix = f"{group}/{resource}" if custom else ("services/specs" if resource == "services" else resource)
    return "/".join(["/registry", prefix, *([namespace] if namespace else []), name])


def precondition_failed(resource: str, group: str, name: str, key: str, why: str) -> ApiError:
    """A UID or resourceVersion precondition the stored object fails: storage's ``InvalidObjError``,
    which the registry turns into a 409 Conflict (``storeerr.InterpretDeleteError`` / ``...UpdateError``)."""
    return conflict(
        resource,
        group,
        name,
        f"StorageError: invalid object, Code: 4, Key: {key}, ResourceVersion: 0, AdditionalErrorMsg: {why}",
    )


STALE = "the object has been modified; please apply your changes to the latest version and try again"


def stale(resource: str, group: str, name: str) -> ApiError:
    """The 409 a write with an out-of-date ``metadata.resourceVersion`` gets."""
    return conflict(resource, group, name, STALE)


class FieldError:
    """One cause of a 422 Invalid (``field.Error`` in apimachinery)."""

    def __init__(self, reason: str, field: str, message: str) -> None:
        self.reason = reason
        self.field = field
        self.message = message

    @classmethod
    def required(cls, field: str, detail: str = "") -> FieldError:
        return cls("FieldValueRequired", field, "Required value" + (f": {detail}" if detail else ""))

    @classmethod
    def invalid(cls, field: str, value: Any, detail: str) -> FieldError:
        return cls("FieldValueInvalid", field, f"Invalid value: {_go_repr(value)}: {detail}")

    @classmethod
    def unsupported(cls, field: str, value: Any, allowed: list[str]) -> FieldError:
        quoted = ", ".join(f'"{a}"' for a in allowed)
        return cls(
            "FieldValueNotSupported",
            field,
            f"Unsupported value: {_go_repr(value)}: supported values: {quoted}",
        )

    @classmethod
    def forbidden(cls, field: str, detail: str) -> FieldError:
        return cls("FieldValueForbidden", field, f"Forbidden: {detail}")

    @classmethod
    def duplicate(cls, field: str, value: Any) -> FieldError:
        return cls("FieldValueDuplicate", field, f"Duplicate value: {_go_repr(value)}")

    @classmethod
    def type_invalid(cls, field: str, value: Any, detail: str) -> FieldError:
        return cls("FieldValueTypeInvalid", field, f"Invalid value: {_go_repr(value)}: {detail}")

    def text(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message


class GoLiteral(str):
    """A value printed as Go prints it, unquoted (``0x0`` for a uint64 zero)."""


def _go_repr(value: Any) -> str:
    if isinstance(value, GoLiteral):
        return str(value)
    if isinstance(value, str):
        return f'"{value}"'
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return '"object"'
    if isinstance(value, list):
        return '"array"'
    return str(value)


def invalid(kind: str, group: str, name: str, errors: list[FieldError]) -> ApiError:
    """422 Invalid with one cause per field error, message joined as the API server does."""
    texts = [e.text() for e in errors]
    joined = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    return ApiError(
        422,
        "Invalid",
        f'{qualified(kind, group)} "{name}" is invalid: {joined}',
        _details(
            name,
            group,
            kind,
            causes=[{"reason": e.reason, "message": e.message, "field": e.field} for e in errors],
        ),
    )


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message, None)


def method_not_allowed() -> ApiError:
    return ApiError(
        405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
    )


def unsupported_media_type(content_type: str, accepted: list[str]) -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: "
        + ", ".join(accepted),
        None,
    )


def resource_not_found() -> ApiError:
    """An unknown resource in a served group version: a JSON Status, as kube-apiserver answers."""
    return ApiError(404, "NotFound", "the server could not find the requested resource", {})


def page_not_found() -> ApiError:
    """A path no handler serves (e.g. a deleted CRD's group): plain text, as Go's mux answers."""
    return ApiError(404, "NotFound", "404 page not found\n", plain=True)


def forbidden(resource: str, group: str, name: str, why: str) -> ApiError:
    return ApiError(
        403,
        "Forbidden",
        f'{qualified(resource, group)} "{name}" is forbidden: {why}',
        _details(name, group, resource),
    )


def namespace_terminating(resource: str, group: str, name: str, namespace: str) -> ApiError:
    """NamespaceLifecycle's refusal of new content in a terminating namespace."""
    error = forbidden(
        resource,
        group,
        name,
        f"unable to create new content in namespace {namespace} because it is being terminated",
    )
    assert error.details is not None
    error.details["causes"] = [
        {
            "reason": "NamespaceTerminating",
            "message": f"namespace {namespace} is being terminated",
            "field": "metadata.namespace",
        }
    ]
    return error


def internal(message: str) -> ApiError:
    return ApiError(
        500, "InternalError", f"Internal error occurred: {message}", {"causes": [{"message": message}]}
    )


def unclassified(message: str) -> ApiError:
    """An error the REST storage returned as a plain Go error (a failed conversion webhook):
    ErrorToAPIStatus makes it a 500 with no reason, which kubectl shows as ``Error from server: ...``."""
    return ApiError(500, "", message, None)


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized", None)


def too_many_requests(message: str, retry_after: int, causes: list[dict[str, str]]) -> ApiError:
    details: dict[str, Any] = {"causes": causes}
    if retry_after:
        details["retryAfterSeconds"] = retry_after
    headers = {"Retry-After": str(retry_after)} if retry_after else {}
    return ApiError(429, "TooManyRequests", message, details, headers=headers)


def gone(message: str) -> ApiError:
    return ApiError(410, "Expired", message, None)


FLOW_CONTROL_REJECTED = "Too many requests, please try again later.\n"


def rejected_by_flow_control(retry_after: int, headers: dict[str, str]) -> ApiError:
    """API Priority and Fairness's 429: not a ``Status`` but Go's ``http.Error`` plain text (the filter
    answers before any serializer is chosen), with ``Retry-After`` and the classification headers."""
    return ApiError(
        429,
        "TooManyRequests",
        FLOW_CONTROL_REJECTED,
        plain=True,
        headers={**headers, "Retry-After": str(retry_after), "X-Content-Type-Options": "nosniff"},
    )
