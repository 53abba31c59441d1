"""Just enough of Kubernetes' protobuf encoding to accept ``kubectl create namespace`` and ``configmap``.

kubectl's imperative generators send ``application/vnd.kubernetes.protobuf``: the ``k8s\\0`` magic, a
``runtime.Unknown`` envelope and the object's generated.proto message. Only the kinds and fields in
:data:`MESSAGES` are decoded; anything else raises :class:`Unsupported` (answered 415) rather than
silently dropping data.
"""

from __future__ import annotations

import base64
from typing import Any

MAGIC = b"k8s\x00"

# message -> field number -> (json name, type); type: "string", "bytes", "bool", "int", a message name,
# "map<string>" / "map<bytes>" (map entries: key = 1, value = 2), "repeated string".
MESSAGES: dict[str, dict[int, tuple[str, str]]] = {
    "Unknown": {
        1: ("typeMeta", "TypeMeta"),
        2: ("raw", "bytes"),
        3: ("contentEncoding", "string"),
        4: ("contentType", "string"),
    },
    "TypeMeta": {1: ("apiVersion", "string"), 2: ("kind", "string")},
    "ObjectMeta": {
        1: ("name", "string"),
        2: ("generateName", "string"),
        3: ("namespace", "string"),
        11: ("labels", "map<string>"),
        12: ("annotations", "map<string>"),
        14: ("finalizers", "repeated string"),
    },
    "Namespace": {
        1: ("metadata", "ObjectMeta"),
        2: ("spec", "NamespaceSpec"),
        3: ("status", "NamespaceStatus"),
    },
    "NamespaceSpec": {1: ("finalizers", "repeated string")},
    "NamespaceStatus": {1: ("phase", "string")},
    "ConfigMap": {
        1: ("metadata", "ObjectMeta"),
        2: ("data", "map<string>"),
        3: ("binaryData", "map<bytes>"),
        4: ("immutable", "bool"),
    },
}
KINDS = {("v1", "Namespace"): "Namespace", ("v1", "ConfigMap"): "ConfigMap"}


class Unsupported(ValueError):
    """A protobuf body this decoder does not know (kind or field)."""


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise Unsupported("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(data: bytes) -> list[tuple[int, int | bytes]]:
    out: list[tuple[int, int | bytes]] = []
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            out.append((number, value))
        elif wire == 2:
            length, pos = _varint(data, pos)
            out.append((number, data[pos : pos + length]))
            pos += length
        else:
            raise Unsupported(f"wire type {wire}")
    return out


def _message(data: bytes, name: str) -> dict[str, Any]:
    schema = MESSAGES[name]
    result: dict[str, Any] = {}
    for number, value in _fields(data):
        if value in (b"", 0):
            continue  # Go's marshaller writes zero values of non-pointer fields: they mean "unset"
        if number not in schema:
            raise Unsupported(f"{name} field {number}")
        json_name, kind = schema[number]
        if kind == "string":
            result[json_name] = bytes(value).decode()  # type: ignore[arg-type]
        elif kind == "bytes":
            result[json_name] = bytes(value)  # type: ignore[arg-type]
        elif kind == "bool":
            result[json_name] = bool(value)
        elif kind == "repeated string":
            result.setdefault(json_name, []).append(bytes(value).decode())  # type: ignore[arg-type]
        elif kind.startswith("map<"):
            entry = dict(_fields(bytes(value)))  # type: ignore[arg-type]
            raw = bytes(entry.get(2, b""))  # type: ignore[arg-type]
            decoded = base64.b64encode(raw).decode() if kind == "map<bytes>" else raw.decode()
            result.setdefault(json_name, {})[bytes(entry.get(1, b"")).decode()] = decoded  # type: ignore[arg-type]
        else:
            result[json_name] = _message(bytes(value), kind)  # type: ignore[arg-type]
    return result


def decode(body: bytes) -> dict[str, Any]:
    """The JSON form of a protobuf-encoded object; :class:`Unsupported` for what is not covered."""
    if not body.startswith(MAGIC):
        raise Unsupported("missing the k8s protobuf magic")
    envelope = _message(body[len(MAGIC) :], "Unknown")
    type_meta = envelope.get("typeMeta", {})
    message = KINDS.get((type_meta.get("apiVersion", ""), type_meta.get("kind", "")))
    if message is None:
        raise Unsupported(f"kind {type_meta.get('apiVersion')}/{type_meta.get('kind')}")
    obj = _message(envelope.get("raw", b""), message)
    return {"apiVersion": type_meta["apiVersion"], "kind": type_meta["kind"], **obj}
