"""CRD conversion webhook: karpenter.sh and karpenter.k8s.aws ``v1beta1`` ⇄ ``v1``, losslessly.

The API server stores v1. When a client writes or reads ``v1beta1`` (a seed manifest applied
unconverted, ``kubectl get nodepools.v1beta1.karpenter.sh``), it sends a ``ConversionReview``
(apiextensions.k8s.io/v1), one object at a time as it decodes them, and ``review`` answers it.
v1beta1 → v1 is ``api.convert`` (the same conversion ``nodewright convert`` does), with two
differences a webhook needs: nothing may become a second object, and nothing may be lost, because
the object is read back in the old version:

- a v1beta1 NodePool's (or NodeClaim's) ``kubelet`` has no place in v1 (it lives in the
  EC2NodeClass): it travels in ``KUBELET_ANNOTATION`` as JSON, as Karpenter v1.0's webhook wrote it,
  and the provisioner applies it over the EC2NodeClass's kubelet at launch (``kubelet_overrides``);
- the v1beta1 ``nodeClassRef`` as written travels in ``NODECLASS_REF_ANNOTATION``;
- whatever a v1 object holds that its v1beta1 form cannot carry travels in ``V1_FIELDS_ANNOTATION``
  and comes back when that form is written: not a list of known fields but the rule itself. The
  v1beta1 form is pruned to the v1beta1 schema (as the API server prunes it), converted back as a
  write of it would be, and every spec or status value that differs from the v1 object is recorded
  with the value the write-back will hold there (``was``) and, inside a list, the item it belongs
  to. So a v1 field added later is carried too, and an edit made through v1beta1 wins: a value is
  restored only where the write still holds ``was``, a list item's members go to the item they
  belonged to. **Metadata never comes from an annotation** (kube-apiserver keeps the stored name
  and uid; only spec and status are restored), and a value restored is pruned to the v1 schema;
- an EC2NodeClass with neither ``role`` nor ``instanceProfile`` (the seeds have none) gets the
  stack's node role, marked by ``ROLE_DEFAULTED_ANNOTATION`` so that reading it back as v1beta1 gives
  the manifest as it was applied.

Every review gets a well-formed answer: an object this webhook cannot convert (another kind, nested
deeper than any of these kinds is) is a ``Failure`` naming it, which fails that request only. An
annotation it cannot read never fails a conversion: the object is converted without it and
``review`` collects a warning naming the object (a ConversionReview response has no ``warnings``
field, unlike an AdmissionReview's: the caller logs them), so reads keep working.
"""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Callable
from typing import Any

from nodewright.api import labels
from nodewright.api.convert import class_ref_from_v1beta1, convert_document, fill_node_role
from nodewright.api.models import KARPENTER_V1
from nodewright.api.schema import SCHEMAS, SCHEMAS_V1BETA1, Schema
from nodewright.api.shapes import as_dict, as_list, dig

Doc = dict[str, Any]
Warn = Callable[[str], None]

KARPENTER_V1BETA1 = "karpenter.sh/v1beta1"
AWS_V1BETA1 = "karpenter.k8s.aws/v1beta1"
KUBELET_ANNOTATION = "compatibility.karpenter.sh/v1beta1-kubelet-conversion"
NODECLASS_REF_ANNOTATION = "compatibility.karpenter.sh/v1beta1-nodeclass-reference"
V1_FIELDS_ANNOTATION = "compatibility.nodewright.io/v1-fields"
ROLE_DEFAULTED_ANNOTATION = "compatibility.nodewright.io/v1beta1-role-defaulted"
REVIEW_API_VERSION = "apiextensions.k8s.io/v1"
SUPPORTED = {
    (labels.KARPENTER_GROUP, "NodePool"),
    (labels.KARPENTER_GROUP, "NodeClaim"),
    (labels.AWS_GROUP, labels.EC2NODECLASS_KIND),
}
# No NodePool, NodeClaim or EC2NodeClass is nested much more than 15 levels (managedFields
# included); 64 leaves room for fields to come and keeps every walk here far below Python's
# recursion limit (a value nested 900 deep used to raise RecursionError).
MAX_DEPTH = 64
# kube-apiserver refuses an object whose annotations together exceed 256 KiB: a bigger annotation
# did not come from it.
MAX_ANNOTATION_BYTES = 256 * 1024
# The parts of an object ``V1_FIELDS_ANNOTATION`` may restore: never metadata.
RESTORABLE = ("spec", "status")
_ABSENT: Any = object()  # "no value here", distinct from JSON null


class ConversionError(ValueError):
    """An object this webhook cannot convert (the message is what the API server shows the client)."""


def review(body: Any, *, node_role: str | None = None, warnings: list[str] | None = None) -> Doc:
    """The ConversionReview answer for ``body`` (always a well-formed review, never an exception).

    A request this webhook cannot answer at all (not a ConversionReview) gets a Failure result; so
    does one with an object it cannot convert, the message naming the object: the API server then
    refuses the client's request with it, as it would for any conversion failure. ``warnings``
    collects what the client cannot be told (a node role filled in, an annotation not readable).
    """
    request = body.get("request") if isinstance(body, dict) else None
    uid = request.get("uid", "") if isinstance(request, dict) else ""
    if not isinstance(request, dict) or not isinstance(request.get("desiredAPIVersion"), str):
        return _answer(uid, [], "not a ConversionReview request with desiredAPIVersion")
    desired = request["desiredAPIVersion"]
    converted = []
    for obj in as_list(request.get("objects")):
        try:
            converted.append(convert(obj, desired, node_role=node_role, warnings=warnings))
        except ConversionError as exc:
            return _answer(uid, [], f"{describe(obj)}: {exc}")
        except Exception as exc:  # a bug here still answers a review, naming the object
            problem = f"{type(exc).__name__}: {exc}"[:300]
            return _answer(uid, [], f"{describe(obj)}: cannot be converted to {desired} ({problem})")
    return _answer(uid, converted, None)


def _answer(uid: str, objects: list[Doc], failure: str | None) -> Doc:
    result: Doc = {"status": "Success"} if failure is None else {"status": "Failure", "message": failure}
    response: Doc = {"uid": uid, "result": result}
    if failure is None:
        response["convertedObjects"] = objects
    return {"apiVersion": REVIEW_API_VERSION, "kind": "ConversionReview", "response": response}


def describe(obj: Any) -> str:
    """``NodePool default``: how a message names an object (its kind and name, cut to a line)."""
    kind = obj.get("kind") if isinstance(obj, dict) else None
    name = dig(obj, "metadata", "name")
    kind_text = kind[:63] if isinstance(kind, str) and kind else "object"
    return f"{kind_text} {name[:253] if isinstance(name, str) and name else '(no name)'}"


def convert(
    obj: Any, desired_api_version: str, *, node_role: str | None = None, warnings: list[str] | None = None
) -> Doc:
    """One object in ``desired_api_version`` (its group's v1 or v1beta1)."""
    if not isinstance(obj, dict) or not isinstance(obj.get("apiVersion"), str):
        raise ConversionError("an object to convert has no apiVersion")
    deep = _deeper_than(obj, MAX_DEPTH)
    if deep is not None:
        raise ConversionError(
            f"nested deeper than {MAX_DEPTH} levels (at {deep}); no object of this kind is, so it is refused"
        )
    group, _, version = obj["apiVersion"].partition("/")
    kind = obj.get("kind")
    desired_group, _, desired_version = desired_api_version.partition("/")
    if (group, kind) not in SUPPORTED or desired_group != group:
        raise ConversionError(f"cannot convert {obj['apiVersion']} {kind} to {desired_api_version}")

    def warn(message: str) -> None:
        if warnings is not None:
            warnings.append(f"{describe(obj)}: {message}")

    if version == desired_version:
        return copy.deepcopy(obj)
    if (version, desired_version) == ("v1beta1", "v1"):
        return _to_v1(obj, node_role, warn)
    if (version, desired_version) == ("v1", "v1beta1"):
        return _to_v1beta1(obj, warn)
    raise ConversionError(f"cannot convert {obj['apiVersion']} {kind} to {desired_api_version}")


# --------------------------------------------------------------------------- v1beta1 → v1


def _to_v1(obj: Doc, node_role: str | None, warn: Warn) -> Doc:
    original = copy.deepcopy(obj)
    saved_fields = _pop_annotation(original, V1_FIELDS_ANNOTATION)
    if obj["kind"] == "NodeClaim":
        out = _nodeclaim_to_v1(original)
    else:
        conversion = convert_document(original)
        out = conversion.documents[0]
    out["status"] = copy.deepcopy(obj["status"]) if "status" in obj else out.get("status")
    if out.get("status") is None:
        out.pop("status", None)
    if obj["kind"] == "NodePool":
        _carry_nodepool_extras(obj, out)
    if obj["kind"] == labels.EC2NODECLASS_KIND:
        _default_role(out, node_role, warn)
    if saved_fields is not None:
        _restore_v1_fields(out, saved_fields, warn)
    return out


def _carry_nodepool_extras(v1beta1: Doc, out: Doc) -> None:
    tspec = as_dict(dig(v1beta1, "spec", "template", "spec"))
    if "kubelet" in tspec:
        _annotate(out, KUBELET_ANNOTATION, json.dumps(tspec["kubelet"], sort_keys=True))
    _keep_written_ref(out, tspec.get("nodeClassRef"))


def _nodeclaim_to_v1(v1beta1: Doc) -> Doc:
    out = copy.deepcopy(v1beta1)
    out["apiVersion"] = KARPENTER_V1
    spec = as_dict(out.get("spec"))
    if "kubelet" in spec:
        _annotate(out, KUBELET_ANNOTATION, json.dumps(spec.pop("kubelet"), sort_keys=True))
    ref = spec.get("nodeClassRef")
    if isinstance(ref, dict):
        _keep_written_ref(out, ref)
        spec["nodeClassRef"] = class_ref_from_v1beta1(ref)
    return out


def _keep_written_ref(out: Doc, ref: Any) -> None:
    """Remember a v1beta1 nodeClassRef that reading back would not write the same way."""
    if isinstance(ref, dict) and ref != _canonical_v1beta1_ref(class_ref_from_v1beta1(ref)):
        _annotate(out, NODECLASS_REF_ANNOTATION, json.dumps(ref, sort_keys=True))


def _canonical_v1beta1_ref(ref: Doc) -> Doc:
    group = ref.get("group") or labels.AWS_GROUP
    return {"apiVersion": f"{group}/v1beta1", "kind": ref.get("kind"), "name": ref.get("name")}


def _default_role(out: Doc, node_role: str | None, warn: Warn) -> None:
    if fill_node_role(out, node_role) and node_role:
        _annotate(out, ROLE_DEFAULTED_ANNOTATION, node_role)
        warn(
            f"neither role nor instanceProfile is set; filled in the stack's node role {node_role} "
            f"(annotation {ROLE_DEFAULTED_ANNOTATION})"
        )


# --------------------------------------------------------------------------- v1 → v1beta1


def _to_v1beta1(obj: Doc, warn: Warn) -> Doc:
    kind = obj["kind"]
    schema = SCHEMAS_V1BETA1[(obj["apiVersion"].partition("/")[0], kind)]
    out = copy.deepcopy(obj)
    _pop_annotation(out, V1_FIELDS_ANNOTATION)  # a stale one: this reading says what it loses
    out["apiVersion"] = AWS_V1BETA1 if kind == labels.EC2NODECLASS_KIND else KARPENTER_V1BETA1
    defaulted_role = None
    spec = out.get("spec")
    if isinstance(spec, dict):
        if kind == "NodePool":
            _nodepool_to_v1beta1(out, spec, schema, warn)
        elif kind == "NodeClaim":
            _nodeclaim_to_v1beta1(out, spec, schema, warn)
        else:
            defaulted_role = _nodeclass_to_v1beta1(out, spec)
    _prune_object(out, schema)  # what the v1beta1 schema carries, as the API server prunes it
    _drop_values_outside_enums(out, schema)  # e.g. amiFamily Windows2025: v1beta1 cannot say it
    lost = _lost_fields(obj, out, schema, defaulted_role)
    if lost:
        _annotate(out, V1_FIELDS_ANNOTATION, json.dumps(lost, sort_keys=True, separators=(",", ":")))
    return out


def _nodepool_to_v1beta1(out: Doc, spec: Doc, schema: Schema, warn: Warn) -> None:
    template = as_dict(spec.get("template"))
    tspec = template.get("spec") if isinstance(template.get("spec"), dict) else None
    disruption = spec.get("disruption") if isinstance(spec.get("disruption"), dict) else None
    if tspec is not None:
        if "expireAfter" in tspec:
            expire = tspec.pop("expireAfter")
            if disruption is None:
                disruption = spec["disruption"] = {}
            disruption["expireAfter"] = expire
        if isinstance(tspec.get("nodeClassRef"), dict):
            tspec["nodeClassRef"] = _ref_to_v1beta1(out, tspec["nodeClassRef"], warn)
        _operators_to_v1beta1(tspec.get("requirements"))
        kubelet_schema = _schema_at(schema, ["spec", "template", "spec", "kubelet"])
        _kubelet_from_annotation(out, tspec, kubelet_schema, warn)
    if disruption is not None and disruption.get("consolidationPolicy") == "WhenEmptyOrUnderutilized":
        disruption["consolidationPolicy"] = "WhenUnderutilized"
        if disruption.get("consolidateAfter") == "0s":
            del disruption["consolidateAfter"]  # v1beta1 takes no consolidateAfter with WhenUnderutilized


def _nodeclaim_to_v1beta1(out: Doc, spec: Doc, schema: Schema, warn: Warn) -> None:
    if isinstance(spec.get("nodeClassRef"), dict):
        spec["nodeClassRef"] = _ref_to_v1beta1(out, spec["nodeClassRef"], warn)
    _operators_to_v1beta1(spec.get("requirements"))
    _kubelet_from_annotation(out, spec, _schema_at(schema, ["spec", "kubelet"]), warn)


# v1's Gte/Lte (Karpenter v1.9) as v1beta1's Gt/Lt say them: over integers, Gte N is Gt N-1.
_V1BETA1_OPERATOR = {"Gte": ("Gt", -1), "Lte": ("Lt", 1)}


def _operators_to_v1beta1(requirements: Any) -> None:
    """Requirements with an operator v1beta1 lacks, written with the one it has (Gte N → Gt N-1,
    Lte N → Lt N+1), so a reader of the v1beta1 form sees the same bound; the v1 operator comes back
    on write through ``V1_FIELDS_ANNOTATION`` (the difference is recorded like any other)."""
    for requirement in as_list(requirements):
        if not isinstance(requirement, dict) or requirement.get("operator") not in _V1BETA1_OPERATOR:
            continue
        operator, shift = _V1BETA1_OPERATOR[requirement["operator"]]
        requirement["operator"] = operator
        values = requirement.get("values")
        if isinstance(values, list) and len(values) == 1 and isinstance(values[0], str):
            # v1 validation refuses a non-integer bound; such a value is carried as it is
            with contextlib.suppress(ValueError):
                requirement["values"] = [str(int(values[0]) + shift)]


def _drop_values_outside_enums(value: Any, schema: Schema) -> None:
    """Remove the members (and list items) whose value the v1beta1 schema's ``enum`` does not allow:
    a v1 value v1beta1 has no word for (amiFamily ``Windows2025``) must not make the v1beta1 form an
    invalid write. What is dropped is recorded and restored like any pruned field."""
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        for key in list(value):
            sub = properties.get(key) or schema.get("additionalProperties")
            if not isinstance(sub, dict):
                continue
            if _outside_enum(value[key], sub):
                del value[key]
            else:
                _drop_values_outside_enums(value[key], sub)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        items = schema["items"]
        value[:] = [item for item in value if not _outside_enum(item, items)]
        for item in value:
            _drop_values_outside_enums(item, items)


def _outside_enum(value: Any, schema: Schema) -> bool:
    return "enum" in schema and not isinstance(value, dict | list) and value not in schema["enum"]


def _kubelet_from_annotation(out: Doc, spec: Doc, kubelet_schema: Schema | None, warn: Warn) -> None:
    """The v1beta1 ``kubelet`` a converted v1beta1 object keeps in ``KUBELET_ANNOTATION``, back in its
    spec; left in the annotation when it is not readable or holds what v1beta1's kubelet cannot."""
    kubelet = _take_json_annotation(out, KUBELET_ANNOTATION, warn)
    if kubelet is _ABSENT:
        return
    carried = copy.deepcopy(kubelet)
    if kubelet_schema is not None:
        _prune(carried, kubelet_schema)
    if carried == kubelet:
        spec["kubelet"] = kubelet
    else:
        _annotate(out, KUBELET_ANNOTATION, json.dumps(kubelet, sort_keys=True))


def _nodeclass_to_v1beta1(out: Doc, spec: Doc) -> str | None:
    """The v1beta1 form of an EC2NodeClass's spec; returns the node role filled in on the way to v1
    (``ROLE_DEFAULTED_ANNOTATION``), if any, as that way back fills it in again."""
    terms = spec.get("amiSelectorTerms")
    aliases = [t.get("alias") for t in terms if isinstance(t, dict) and t.get("alias")] if terms else []
    if aliases:
        family_name = labels.ALIAS_FAMILIES.get(str(aliases[0]).partition("@")[0].lower())
        if not spec.get("amiFamily") and family_name:
            spec["amiFamily"] = family_name
        del spec["amiSelectorTerms"]  # v1beta1 has no alias: its amiFamily picks the latest AMI
    defaulted = _pop_annotation(out, ROLE_DEFAULTED_ANNOTATION)
    if defaulted is not None and spec.get("role") == defaulted:
        del spec["role"]
        return defaulted
    return None


def _ref_to_v1beta1(out: Doc, ref: Doc, warn: Warn) -> Doc:
    written = _take_json_annotation(out, NODECLASS_REF_ANNOTATION, warn)
    if isinstance(written, dict) and written.get("name") == ref.get("name"):
        return written  # as the v1beta1 manifest wrote it
    return _canonical_v1beta1_ref(ref)


# --------------------------------------------------------------------------- what v1beta1 cannot carry


def _lost_fields(original: Doc, v1beta1: Doc, schema: Schema, defaulted_role: str | None) -> list[Doc]:
    """What writing ``v1beta1`` back unchanged would not give back of ``original``, as entries of
    ``V1_FIELDS_ANNOTATION``: ``path`` (keys and list indices from spec or status), ``set`` (the v1
    value; absent: remove the field), ``was`` (what the write-back holds there; absent: nothing) and
    ``items`` (for each index in the path, that list's length and the item, as the write-back holds
    them: how the item is found again when the list was edited through v1beta1)."""
    written_back = copy.deepcopy(v1beta1)
    _default(written_back, schema)  # a v1beta1 write is defaulted as v1beta1 before it is converted
    back = _to_v1(written_back, defaulted_role, lambda message: None)
    entries: list[Doc] = []
    for part in RESTORABLE:
        _diff(back.get(part, _ABSENT), original.get(part, _ABSENT), [part], [], entries)
    # Only v1 fields: the API server keeps no other in storage (and a restore would refuse them).
    v1_schema = SCHEMAS[(original["apiVersion"].partition("/")[0], original["kind"])]
    return [e for e in entries if _schema_at(v1_schema, e["path"]) is not None]


def _diff(was: Any, now: Any, path: list[Any], items: list[Doc], out: list[Doc]) -> None:
    if isinstance(was, dict) and isinstance(now, dict):
        for key in sorted(set(was) | set(now)):
            _diff(was.get(key, _ABSENT), now.get(key, _ABSENT), [*path, key], items, out)
        return
    if isinstance(was, list) and isinstance(now, list) and len(was) == len(now):
        for i, (item_was, item_now) in enumerate(zip(was, now, strict=True)):
            _diff(item_was, item_now, [*path, i], [*items, {"len": len(was), "item": item_was}], out)
        return
    if _same(was, now):
        return
    entry: Doc = {"path": path}
    if was is not _ABSENT:
        entry["was"] = was
    if now is not _ABSENT:
        entry["set"] = now
    if items:
        entry["items"] = items
    out.append(entry)


def _restore_v1_fields(out: Doc, saved: str, warn: Warn) -> None:
    """Put back what ``V1_FIELDS_ANNOTATION`` says the v1beta1 form lost, where the write still holds
    what that form gave (an edit made through v1beta1 wins); a problem is a warning, never an error."""
    entries, problem = _parse_json(saved)
    if problem is None and not isinstance(entries, list):
        problem = "not a list of fields: written by another version of Nodewright?"
    if problem is not None or not isinstance(entries, list):
        warn(f"annotation {V1_FIELDS_ANNOTATION} is not readable ({problem}); ignored: converted without it")
        return
    schema = SCHEMAS[(out["apiVersion"].partition("/")[0], out["kind"])]
    resolver = _Resolver(copy.deepcopy(out))
    places = []
    for entry in entries:
        place = resolver.resolve(entry, schema)
        if isinstance(place, str):
            warn(f"annotation {V1_FIELDS_ANNOTATION}: {place}")
        elif place is not None:
            places.append(place)
    for steps, value in places:
        _put(out, steps, value)


class _Resolver:
    """Where each entry of ``V1_FIELDS_ANNOTATION`` goes in ``written`` (the v1 form of the v1beta1
    write, before anything is restored): list items are found by the item the entry names, so an
    item added, removed or moved through v1beta1 does not take another item's members."""

    def __init__(self, written: Doc) -> None:
        self.written = written
        self.found: dict[tuple[tuple[Any, ...], int], int | None] = {}
        self.taken: dict[tuple[Any, ...], set[int]] = {}

    def resolve(self, entry: Any, schema: Schema) -> tuple[list[Any], Any] | str | None:
        """``(steps, value)`` to put (``value`` ``_ABSENT``: remove), a problem, or None (the write
        already holds the v1 value)."""
        path = entry.get("path") if isinstance(entry, dict) else None
        if not isinstance(path, list) or not path or len(path) > MAX_DEPTH or not all(map(_is_step, path)):
            return "an entry without a readable path; ignored"
        shown = _path_text(path)
        if path[0] not in RESTORABLE:
            return f"{shown}: only spec and status are restored from it, never metadata; ignored"
        field_schema = _schema_at(schema, path)
        if field_schema is None:
            return f"{shown}: not a field of v1; ignored"
        items = entry.get("items", [])
        if not _readable_items(items, sum(isinstance(step, int) for step in path)) or (
            "set" not in entry and isinstance(path[-1], int)
        ):
            return f"{shown}: not a readable entry; ignored"
        steps: list[Any] = []
        target: Any = self.written
        anchors = iter(items)
        for position, step in enumerate(path):
            if isinstance(step, int):
                anchor = next(anchors)
                index = self._index(tuple(steps), target, step, anchor) if isinstance(target, list) else None
                if index is None:
                    return f"{shown}: not restored, its list item was removed or changed through v1beta1"
                steps.append(index)
                target = target[index]
            elif isinstance(target, dict) and (step in target or position == len(path) - 1):
                steps.append(step)
                target = target.get(step, _ABSENT)
            else:
                return f"{shown}: not restored, its place was removed through v1beta1"
        value = copy.deepcopy(entry["set"]) if "set" in entry else _ABSENT
        if value is not _ABSENT:
            _prune(value, field_schema)  # what the API server keeps of the v1 answer
        if _same(target, value):
            return None  # the write holds the v1 value already
        if not _same(target, entry.get("was", _ABSENT)):
            return f"{shown}: not restored, it was changed through v1beta1 (kept as written)"
        return steps, value

    def _index(self, where: tuple[Any, ...], items: list[Any], index: int, anchor: Doc) -> int | None:
        """Where the list at ``where`` now holds what was item ``index`` of ``anchor['len']``: the same
        place if it still holds that item, else the first free place that does, else the same place
        if the list kept its length (an item edited in place)."""
        key = (where, index)
        if key not in self.found:
            taken = self.taken.setdefault(where, set())
            same = [j for j, item in enumerate(items) if item == anchor["item"] and j not in taken]
            if index in same:
                found: int | None = index
            elif same:
                found = same[0]
            elif len(items) == anchor["len"] and index < len(items) and index not in taken:
                found = index
            else:
                found = None
            if found is not None:
                taken.add(found)
            self.found[key] = found
        return self.found[key]


def _readable_items(items: Any, count: int) -> bool:
    return (
        isinstance(items, list)
        and len(items) == count
        and all(isinstance(a, dict) and isinstance(a.get("len"), int) and "item" in a for a in items)
    )


def _put(out: Doc, steps: list[Any], value: Any) -> None:
    target: Any = out
    for step in steps[:-1]:
        held = (isinstance(target, list) and isinstance(step, int) and step < len(target)) or (
            isinstance(target, dict) and step in target
        )
        if not held:
            return  # another entry replaced what held it
        target = target[step]
    leaf = steps[-1]
    if isinstance(leaf, int) and isinstance(target, list) and leaf < len(target):
        target[leaf] = value
    elif isinstance(leaf, str) and isinstance(target, dict):
        if value is _ABSENT:
            target.pop(leaf, None)
        else:
            target[leaf] = value


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON values (``True`` is not ``1``); ``_ABSENT`` only to itself."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _is_step(step: Any) -> bool:
    return isinstance(step, str) or (isinstance(step, int) and not isinstance(step, bool) and step >= 0)


def _path_text(path: list[Any]) -> str:
    text = "".join(f"[{step}]" if isinstance(step, int) else f".{step}" for step in path).lstrip(".")
    return text if len(text) <= 200 else f"{text[:200]}…"


# ----------------------------------------------------------------- schemas, as the API server uses them


def _schema_at(schema: Schema, path: list[Any]) -> Schema | None:
    """The structural schema of the field at ``path`` (None: no such field)."""
    node: Any = schema
    for step in path:
        properties = node.get("properties") or {}
        if isinstance(step, int):
            node = node.get("items")
        elif step in properties:
            node = properties[step]
        else:
            node = node.get("additionalProperties")
        if not isinstance(node, dict):
            return None
    found: Schema = node
    return found


def _prune_object(obj: Doc, schema: Schema) -> None:
    """Structural pruning of a whole object, as kube-apiserver prunes a custom resource: fields the
    schema does not know are dropped (apiVersion, kind and metadata are the API server's own)."""
    properties = schema.get("properties") or {}
    for key in list(obj):
        if key in ("apiVersion", "kind", "metadata"):
            continue
        if key in properties:
            _prune(obj[key], properties[key])
        else:
            del obj[key]


def _prune(value: Any, schema: Schema) -> None:
    if isinstance(value, dict):
        properties = schema.get("properties")
        additional = schema.get("additionalProperties")
        for key in list(value):
            if properties and key in properties:
                _prune(value[key], properties[key])
            elif isinstance(additional, dict):
                _prune(value[key], additional)
            elif not (additional is True or schema.get("x-kubernetes-preserve-unknown-fields")):
                del value[key]
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            _prune(item, schema["items"])


def _default(value: Any, schema: Schema) -> None:
    """Structural defaulting, as kube-apiserver defaults a request: each absent property with a
    ``default`` gets it, then the same inside every value (those just defaulted included)."""
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        for key, sub in properties.items():
            if key not in value and "default" in sub:
                value[key] = copy.deepcopy(sub["default"])
        additional = schema.get("additionalProperties")
        for key, item in value.items():
            if key in properties:
                _default(item, properties[key])
            elif isinstance(additional, dict):
                _default(item, additional)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            _default(item, schema["items"])


# --------------------------------------------------------------------------- helpers


def kubelet_overrides(obj: Doc) -> Doc:
    """The kubelet settings a converted v1beta1 NodePool/NodeClaim carries in its annotation ({} if none)."""
    raw = ((obj.get("metadata") or {}).get("annotations") or {}).get(KUBELET_ANNOTATION)
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _deeper_than(value: Any, limit: int) -> str | None:
    """The path of the first place in ``value`` nested deeper than ``limit`` (None: none is); a
    loop, not a recursion, so any depth is measured."""
    stack: list[tuple[Any, int, Any]] = [(value, 0, None)]
    while stack:
        current, depth, trail = stack.pop()
        if depth > limit:
            steps: list[Any] = []
            while trail is not None:
                trail, step = trail
                steps.append(step)
            return _path_text(steps[::-1])
        if isinstance(current, dict):
            stack.extend((item, depth + 1, (trail, str(key))) for key, item in current.items())
        elif isinstance(current, list):
            stack.extend((item, depth + 1, (trail, i)) for i, item in enumerate(current))
    return None


def _parse_json(raw: str) -> tuple[Any, str | None]:
    """The JSON value of an annotation and None, or ``_ABSENT`` and why it cannot be read."""
    if len(raw.encode("utf-8", errors="replace")) > MAX_ANNOTATION_BYTES:
        return _ABSENT, f"larger than {MAX_ANNOTATION_BYTES} bytes"
    try:
        value = json.loads(raw)
    except RecursionError:
        return _ABSENT, f"nested deeper than {MAX_DEPTH} levels"
    except ValueError as exc:
        return _ABSENT, f"not JSON: {exc}"
    if _deeper_than(value, MAX_DEPTH) is not None:
        return _ABSENT, f"nested deeper than {MAX_DEPTH} levels"
    return value, None


def _take_json_annotation(obj: Doc, key: str, warn: Warn) -> Any:
    """The JSON object in annotation ``key``, removed from ``obj`` (``_ABSENT`` when there is none);
    one that is not readable stays where it is, with a warning, and reads as ``_ABSENT``."""
    raw = _pop_annotation(obj, key)
    if raw is None:
        return _ABSENT
    value, problem = _parse_json(raw)
    if isinstance(value, dict):
        return value
    problem = problem or "not a JSON object"
    warn(f"annotation {key} is not readable ({problem}); left as it is")
    _annotate(obj, key, raw)
    return _ABSENT


def _annotate(obj: Doc, key: str, value: str) -> None:
    metadata = obj.setdefault("metadata", {})
    metadata.setdefault("annotations", {})[key] = value


def _pop_annotation(obj: Doc, key: str) -> str | None:
    annotations = (obj.get("metadata") or {}).get("annotations")
    if not isinstance(annotations, dict) or key not in annotations:
        return None
    value = annotations.pop(key)
    if not annotations:
        del obj["metadata"]["annotations"]
    return str(value)


__all__ = [
    "KUBELET_ANNOTATION",
    "MAX_DEPTH",
    "NODECLASS_REF_ANNOTATION",
    "ROLE_DEFAULTED_ANNOTATION",
    "V1_FIELDS_ANNOTATION",
    "ConversionError",
    "convert",
    "describe",
    "kubelet_overrides",
    "review",
]
