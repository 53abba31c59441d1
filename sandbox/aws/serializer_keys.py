"""moto's response serializer finding each attribute's name once per (model class, key, shape),
rather than once per value it serializes.

moto (5.2) serializes a response by walking the botocore output shape and, for every member of
every object, asking ``AttributePicker`` which attribute holds it: each call builds the alias
providers (explicit ``Meta`` aliases, the model's serialization name, class- and shape-prefixed
short names) to list the possible attribute names, then tries the response's transformers with an
``endswith`` against every key path it has. A DescribeInstances answer is about 1,500 such calls per
instance, 2 ms of CPU per instance; the sandbox's kubelet, the product's garbage collection and the
fault rig's invariant checks describe the instances many times a minute, and moto's serialization
was the largest cost of the e2e stories after the API emulator's.

The possible names depend only on the object's class, the key and the shape (the aliases read
``type(obj).__name__``, the class's ``Meta``, and the shape's name, parent and serialization), and
the transformer on the key path alone: both are kept after their first use. The value is still
read from the object each time, in the same order of names, so the answer is moto's own.

moto then writes the XML with ``xmltodict.unparse``, which checks every element's name character
by character (xmltodict 1.0: about two fifths of writing a DescribeInstances answer). The names are
the botocore shapes' members, a few hundred in all: a name found valid is remembered, and one that
is not is still refused, each time, by xmltodict's own check.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import xmltodict
from moto.core.constants import MISSING
from moto.core.serialize import DEFAULT_ALIAS_PROVIDERS, AttributePicker
from moto.core.utils import get_value

_moto_pick = AttributePicker.__call__  # moto's own, for comparing answers (tests)
_Key = tuple[type, type, str, Any]
_names: dict[_Key, tuple[str, ...]] = {}
# id of a transformers map and a key path → (the map, kept so the id stays its own; the transformer)
_transforms: dict[tuple[int, str], tuple[Any, Callable[[Any], Any] | None]] = {}


def _pick(self: Any, context: Any) -> Any:
    obj = context.obj
    key = (type(self), type(obj), context.key, context.shape)
    names = _names.get(key)
    if names is None:
        names = tuple(self.get_possible_keys(context))
        if self.alias_providers is DEFAULT_ALIAS_PROVIDERS:  # another picker's aliases are not kept
            _names[key] = names
    value = None
    for name in names:
        found = get_value(obj, name, MISSING)
        if found is not MISSING:
            value = found
            break
    transformers = self.response_transformers
    if transformers:
        key_path = f"{context.key_path}.{context.key}"
        kept = _transforms.get((id(transformers), key_path))
        if kept is None or kept[0] is not transformers:
            chosen = next((t for path, t in transformers.items() if key_path.endswith(path)), None)
            kept = _transforms[(id(transformers), key_path)] = (transformers, chosen)
        if kept[1] is not None:
            value = kept[1](value)
    return value


_check_name = xmltodict._validate_name
_valid_names: set[tuple[str, str]] = set()


def _validate_name(value: Any, kind: str) -> None:
    if isinstance(value, str) and (value, kind) in _valid_names:
        return
    _check_name(value, kind)  # raises for a name xmltodict refuses
    if isinstance(value, str):
        _valid_names.add((value, kind))


def install() -> None:
    """Patch moto's ``AttributePicker.__call__`` and xmltodict's name check (idempotent; the answer
    is moto's own, so the patches stay for the process)."""
    AttributePicker.__call__ = _pick  # type: ignore[method-assign]
    xmltodict._validate_name = _validate_name
