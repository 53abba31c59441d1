"""The protobuf schema of the built-in Kubernetes types, read from a Go binary that carries them.

Every Go program built from k8s.io/api and k8s.io/apimachinery (kubectl included) embeds the
gzipped ``FileDescriptorProto`` of each ``generated.proto`` it links. This module finds them,
decodes the descriptors (a few fields of descriptor.proto, decoded by hand: no protobuf runtime
is needed) and writes the compact table ``k8s_protobuf_schema.json`` that ``protobuf.py`` decodes
request bodies with. The table is data of the Kubernetes wire format, regenerated with::

    python -m sandbox.apiserver.protoschema $(command -v kubectl)

(the checked-in table comes from kubectl v1.32.4; field numbers never change between versions).
"""

from __future__ import annotations

import json
import re
import sys
import zlib
from pathlib import Path
from typing import Any

SCHEMA_FILE = Path(__file__).with_name("k8s_protobuf_schema.json")
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"  # what Go's gzip writer emits
# generated.proto files whose types the emulator serves or kubectl sends.
PACKAGES = re.compile(
    r"^k8s\.io\.(apimachinery\.pkg\.(apis\.meta\.v1|runtime|runtime\.schema|api\.resource|util\.intstr)"
    r"|api\.(core|apps|batch|rbac|policy|networking|scheduling|coordination|storage|events|authorization"
    r"|authentication|certificates|discovery|node|admissionregistration)\.v1|api\.autoscaling\.v[12])$"
)
# descriptor.proto field types (FieldDescriptorProto.Type).
TYPE_NAMES = {
    1: "double",
    2: "float",
    3: "int64",
    4: "uint64",
    5: "int32",
    8: "bool",
    9: "string",
    11: "message",
    12: "bytes",
    13: "uint32",
    17: "sint32",
    18: "sint64",
}


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def fields(data: bytes) -> list[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) of one serialized message."""
    out: list[tuple[int, int, int | bytes]] = []
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            out.append((number, wire, value))
        elif wire == 1:
            out.append((number, wire, data[pos : pos + 8]))
            pos += 8
        elif wire == 2:
            length, pos = _varint(data, pos)
            out.append((number, wire, data[pos : pos + length]))
            pos += length
        elif wire == 5:
            out.append((number, wire, data[pos : pos + 4]))
            pos += 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
    return out


def _message_types(data: bytes, prefix: str, table: dict[str, Any]) -> None:
    """DescriptorProto: 1 name, 2 field, 3 nested_type, 7 options (7: map_entry)."""
    name = ""
    field_list: list[list[Any]] = []
    nested: list[bytes] = []
    map_entry = False
    for number, _, value in fields(data):
        if number == 1:
            name = bytes(value).decode()
        elif number == 2:
            field_list.append(_field(bytes(value)))
        elif number == 3:
            nested.append(bytes(value))
        elif number == 7:
            map_entry = any(n == 7 and v for n, _, v in fields(bytes(value)))
    full = f"{prefix}.{name}"
    table[full] = {"fields": field_list, **({"map": True} if map_entry else {})}
    for child in nested:
        _message_types(child, full, table)


def _field(data: bytes) -> list[Any]:
    """FieldDescriptorProto → [number, name, type, repeated, message type name]."""
    name, number, label, kind, type_name = "", 0, 1, 0, ""
    for field_number, _, value in fields(data):
        if field_number == 1:
            name = bytes(value).decode()
        elif field_number == 3:
            number = int(value)
        elif field_number == 4:
            label = int(value)
        elif field_number == 5:
            kind = int(value)
        elif field_number == 6:
            type_name = bytes(value).decode().lstrip(".")
    return [number, name, TYPE_NAMES.get(kind, str(kind)), label == 3, type_name]


def descriptors(binary: bytes) -> list[bytes]:
    """Every gzipped generated.proto FileDescriptorProto in a Go binary."""
    found = []
    for match in re.finditer(re.escape(GZIP_HEADER), binary):
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            raw = inflater.decompress(binary[match.start() : match.start() + 4_000_000])
        except zlib.error:
            continue
        if raw[:1] == b"\x0a" and b"generated.proto" in raw[: raw[1] + 2]:
            found.append(raw)
    return found


def schema_from_binary(binary: bytes) -> dict[str, Any]:
    messages: dict[str, Any] = {}
    for raw in descriptors(binary):
        package = ""
        types: list[bytes] = []
        for number, _, value in fields(raw):
            if number == 2:
                package = bytes(value).decode()
            elif number == 4:
                types.append(bytes(value))
        if PACKAGES.match(package):
            for data in types:
                _message_types(data, package, messages)
    return {"source": "FileDescriptorProtos embedded in kubectl", "messages": dict(sorted(messages.items()))}


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m sandbox.apiserver.protoschema PATH_TO_KUBECTL", file=sys.stderr)
        return 2
    schema = schema_from_binary(Path(argv[1]).read_bytes())
    SCHEMA_FILE.write_text(json.dumps(schema, separators=(",", ":"), sort_keys=True) + "\n")
    print(f"{len(schema['messages'])} messages written to {SCHEMA_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
