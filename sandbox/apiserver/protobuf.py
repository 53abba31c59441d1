"""Kubernetes' protobuf request bodies (``application/vnd.kubernetes.protobuf``) decoded to their JSON form.

kubectl sends protobuf for built-in types (``kubectl create deployment|job|service|secret|...``,
``kubectl run``, ``kubectl auth can-i``): the ``k8s\\0`` magic, a ``runtime.Unknown`` envelope
(typeMeta, raw) and the object's generated.proto message. The messages' field numbers, names and
types come from ``k8s_protobuf_schema.json`` (see ``protoschema.py``: the descriptors kubectl itself
carries). The JSON mapping is apimachinery's: ``Time`` → RFC 3339, ``MicroTime`` with microseconds,
``Duration`` → Go duration text, ``Quantity`` → its string, ``IntOrString`` → int or string,
``RawExtension``/``FieldsV1`` → embedded JSON, bytes → base64, map entries → objects. Go writes
non-pointer fields even when zero: an empty string and the zero ``Time`` mean "unset" and are
dropped, while numbers and booleans are kept (a pointer field's explicit 0, ``--replicas=0``, is 0).
A kind or field the table lacks raises :class:`Unsupported` (answered 415) rather than losing data.
"""

from __future__ import annotations

import base64
import functools
import json
import struct
from datetime import UTC, datetime
from typing import Any

from .protoschema import SCHEMA_FILE, fields

MAGIC = b"k8s\x00"
META = "k8s.io.apimachinery.pkg.apis.meta.v1"
ZERO_TIME_SECONDS = -62135596800  # Go's zero time.Time (year 1) as Unix seconds


class Unsupported(ValueError):
    """A protobuf body this decoder does not know (kind or field)."""


@functools.cache
def _messages() -> dict[str, Any]:
    return json.loads(SCHEMA_FILE.read_text())["messages"]


def message_for(api_version: str, kind: str) -> str | None:
    """The generated.proto message of a built-in kind: apps/v1 Deployment is k8s.io.api.apps.v1.Deployment."""
    group, _, version = api_version.rpartition("/")
    if group == "meta.k8s.io" or (not group and kind in ("DeleteOptions", "Status")):
        name = f"{META}.{kind}"
    else:
        name = f"k8s.io.api.{group.split('.')[0] or 'core'}.{version}.{kind}"
    return name if name in _messages() else None


def _signed(value: int, bits: int = 64) -> int:
    return value - (1 << bits) if value >= 1 << (bits - 1) else value


def _go_duration(nanoseconds: int) -> str:
    """time.Duration.String() for the whole seconds Kubernetes uses (``1h0m0s``, ``30s``, ``0s``)."""
    if nanoseconds % 1_000_000_000:
        return f"{nanoseconds / 1e9:g}s"
    seconds = nanoseconds // 1_000_000_000
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"


def _special(name: str, data: bytes) -> tuple[bool, Any]:
    """(handled, value) for the apimachinery types whose JSON form is not an object."""
    values = {number: value for number, _, value in fields(data)}
    if name in (f"{META}.Time", f"{META}.MicroTime"):
        seconds = _signed(int(values.get(1, 0)))
        nanos = int(values.get(2, 0))
        if seconds == ZERO_TIME_SECONDS or (seconds == 0 and nanos == 0):
            return True, None
        moment = datetime.fromtimestamp(seconds, UTC).replace(microsecond=nanos // 1000)
        if name.endswith("MicroTime"):
            return True, moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        return True, moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    if name == f"{META}.Duration":
        return True, _go_duration(_signed(int(values.get(1, 0))))
    if name == "k8s.io.apimachinery.pkg.api.resource.Quantity":
        return True, bytes(values.get(1, b"")).decode()
    if name == "k8s.io.apimachinery.pkg.util.intstr.IntOrString":
        if int(values.get(1, 0)) == 1:
            return True, bytes(values.get(3, b"")).decode()
        return True, _signed(int(values.get(2, 0)), 32)
    if name in ("k8s.io.apimachinery.pkg.runtime.RawExtension", f"{META}.FieldsV1"):
        raw = bytes(values.get(1, b""))
        if not raw:
            return True, None
        if raw.startswith(MAGIC):
            return True, decode(raw)
        return True, json.loads(raw)
    return False, None


def _scalar(kind: str, wire: int, value: int | bytes) -> Any:
    if kind == "string":
        return bytes(value).decode()
    if kind == "bytes":
        return base64.b64encode(bytes(value)).decode()
    if kind == "bool":
        return bool(value)
    if kind in ("int64", "uint64", "uint32"):
        return _signed(int(value)) if kind == "int64" else int(value)
    if kind == "int32":
        return _signed(int(value), 64)  # negative int32s travel as 10-byte varints
    if kind == "double" and wire == 1:
        return struct.unpack("<d", bytes(value))[0]
    if kind == "float" and wire == 5:
        return struct.unpack("<f", bytes(value))[0]
    raise Unsupported(f"field type {kind}")


def decode_message(data: bytes, name: str) -> Any:
    handled, special = _special(name, data)
    if handled:
        return special
    schema = _messages().get(name)
    if schema is None:
        raise Unsupported(f"message {name}")
    by_number = {f[0]: f for f in schema["fields"]}
    result: dict[str, Any] = {}
    for number, wire, value in fields(data):
        field = by_number.get(number)
        if field is None:
            raise Unsupported(f"{name} field {number}")
        _, json_name, kind, repeated, type_name = field
        if kind == "message":
            entry = _messages().get(type_name) or {}
            if entry.get("map"):
                key, item = _map_entry(bytes(value), type_name)
                result.setdefault(json_name, {})[key] = item
                continue
            decoded = decode_message(bytes(value), type_name)
        else:
            decoded = _scalar(kind, wire, value)
            if decoded == "" and not repeated:
                continue  # a non-pointer string Go wrote empty: unset
        if repeated:
            result.setdefault(json_name, []).append(decoded)
        elif decoded is not None:
            result[json_name] = decoded
    return result


def _map_entry(data: bytes, type_name: str) -> tuple[str, Any]:
    key_field, value_field = sorted(_messages()[type_name]["fields"])[:2]
    key, item = "", None
    for number, wire, value in fields(data):
        if number == 1:
            key = _scalar(key_field[2], wire, value)
        elif number == 2:
            kind, item_type = value_field[2], value_field[4]
            item = (
                decode_message(bytes(value), item_type) if kind == "message" else _scalar(kind, wire, value)
            )
    if item is None:
        kind = value_field[2]
        item = "" if kind in ("string", "bytes") else ({} if kind == "message" else 0)
    return key, item


def decode(body: bytes) -> dict[str, Any]:
    """The JSON form of a protobuf-encoded object; :class:`Unsupported` for what is not covered."""
    if not body.startswith(MAGIC):
        raise Unsupported("missing the k8s protobuf magic")
    envelope = {number: value for number, _, value in fields(body[len(MAGIC) :])}
    type_meta = {n: bytes(v).decode() for n, _, v in fields(bytes(envelope.get(1, b"")))}
    api_version, kind = type_meta.get(1, ""), type_meta.get(2, "")
    message = message_for(api_version, kind)
    if message is None:
        raise Unsupported(f"kind {api_version}/{kind}")
    obj = decode_message(bytes(envelope.get(2, b"")), message)
    return {"apiVersion": api_version, "kind": kind, **obj}
