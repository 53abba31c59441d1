"""The emulator's pure pieces (selectors, patches, storage history, printer columns), without HTTP."""

from __future__ import annotations

from typing import Any

import pytest

from sandbox.apiserver.patching import PatchError, json_patch, merge_patch, strategic_merge_patch
from sandbox.apiserver.printers import _jsonpath
from sandbox.apiserver.resources import BUILTINS
from sandbox.apiserver.selectors import (
    FieldGetter,
    SelectorError,
    match_selector_object,
    parse_field_selector,
    parse_label_selector,
)
from sandbox.apiserver.storage import Store, TooOld
from sandbox.apiserver.strategies import strategy_for


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ("a=b", {"a": "b"}, True),
        ("a==b", {"a": "c"}, False),
        ("a!=b", {}, True),
        ("a in (x, y),b", {"a": "y", "b": ""}, True),
        ("a notin (x)", {"a": "x"}, False),
        ("!a", {"b": "1"}, True),
        ("example.com/role=web", {"example.com/role": "web"}, True),
        ("n>3", {"n": "5"}, True),
        ("n<3", {"n": "5"}, False),
        ("", {"anything": "1"}, True),
    ],
)
def test_label_selector_matches_as_the_api_server(
    selector: str, labels: dict[str, str], expected: bool
) -> None:
    assert parse_label_selector(selector).matches(labels) is expected


@pytest.mark.parametrize("bad", ["a in (x", "a=b=c", "=b", "a,", "-a=b", "a=b c", "a in x", "a=" + "v" * 64])
def test_invalid_label_selectors_raise(bad: str) -> None:
    with pytest.raises(SelectorError):
        parse_label_selector(bad)


def _fields_of(plural: str) -> dict[str, FieldGetter]:
    """What the core kind's strategy lets a field selector name."""
    rt = next(r for r in BUILTINS if r.group == "" and r.plural == plural)
    return strategy_for(rt).selectable_fields(rt)


def test_field_selector_support_is_per_resource() -> None:
    pods = parse_field_selector("spec.nodeName=n1,status.phase!=Failed", _fields_of("pods"))
    assert pods.matches(
        {"metadata": {"name": "p"}, "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}}
    )
    assert pods.value_of("spec.nodeName") == "n1"
    with pytest.raises(SelectorError, match=r"field label not supported: spec\.nodeName"):
        parse_field_selector("spec.nodeName=n1", _fields_of("nodes"))
    assert parse_field_selector("spec.unschedulable=true", _fields_of("nodes")).matches(
        {"spec": {"unschedulable": True}}
    )


def test_selector_objects_null_matches_nothing_and_empty_everything() -> None:
    assert match_selector_object(None, {"a": "b"}) is False
    assert match_selector_object({}, {"a": "b"}) is True
    expr = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}
    assert match_selector_object(expr, {"zone": "b"}) is True
    assert match_selector_object(expr, {}) is False


def test_merge_patch_null_deletes_and_lists_replace() -> None:
    target = {"a": {"b": 1, "c": 2}, "l": [1, 2]}
    assert merge_patch(target, {"a": {"b": None}, "l": [3]}) == {"a": {"c": 2}, "l": [3]}
    assert target == {"a": {"b": 1, "c": 2}, "l": [1, 2]}  # not mutated


def test_strategic_merge_directives_kubectl_emits() -> None:
    pod = {
        "metadata": {"finalizers": ["a", "b"]},
        "spec": {
            "containers": [{"name": "x", "image": "1"}, {"name": "y", "image": "2"}],
            "tolerations": [{"key": "t"}],
        },
    }
    patch = {
        "metadata": {"$deleteFromPrimitiveList/finalizers": ["a"], "finalizers": ["c"]},
        "spec": {
            "$setElementOrder/containers": [{"name": "y"}, {"name": "x"}, {"name": "z"}],
            "containers": [{"name": "x", "$patch": "delete"}, {"name": "z", "image": "3"}],
            "tolerations": [{"key": "u"}],
        },
    }
    out = strategic_merge_patch(pod, patch)
    # No $setElementOrder/finalizers: the added "c" goes before the kept "b", as mergeSortedSlice puts it.
    assert out["metadata"]["finalizers"] == ["c", "b"]
    assert [c["name"] for c in out["spec"]["containers"]] == ["y", "z"]
    assert out["spec"]["tolerations"] == [{"key": "u"}]
    conditions = {
        "status": {"conditions": [{"type": "Ready", "status": "False"}, {"type": "A", "status": "True"}]}
    }
    merged = strategic_merge_patch(
        conditions, {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    )
    assert merged["status"]["conditions"] == [
        {"type": "Ready", "status": "True"},
        {"type": "A", "status": "True"},
    ]
    retained = strategic_merge_patch(
        {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}},
        {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}},
    )
    assert retained == {"strategy": {"type": "Recreate"}}


CONDITIONS = [{"type": "Ready", "status": "False"}, {"type": "A", "status": "True"}]


@pytest.mark.parametrize(
    ("patch", "order"),
    [
        # kube-apiserver (apimachinery strategicpatch, mergeSlice + normalizeElementOrder): the items the
        # patch names keep the patch's order; a server-only item goes before one of them only when the
        # live list had it first; an item the live list lacked goes before the server-only items left.
        ([{"type": "B", "status": "True"}], ["B", "Ready", "A"]),
        ([{"type": "A", "status": "False"}], ["Ready", "A"]),
        ([{"type": "Ready", "status": "True"}, {"type": "B", "status": "True"}], ["Ready", "B", "A"]),
        ([{"type": "A", "status": "True"}, {"type": "Ready", "status": "True"}], ["A", "Ready"]),
        ([{"type": "Ready", "$patch": "delete"}, {"type": "B", "status": "True"}], ["B", "A"]),
    ],
    ids=["added-goes-first", "updated-stays", "updated-then-added", "patch-order-wins", "delete-and-add"],
)
def test_a_status_patch_leaves_pod_conditions_in_kube_apiservers_order(
    patch: list[dict[str, str]], order: list[str]
) -> None:
    out = strategic_merge_patch({"status": {"conditions": CONDITIONS}}, {"status": {"conditions": patch}})
    assert [c["type"] for c in out["status"]["conditions"]] == order


def test_set_element_order_orders_the_named_items_and_interleaves_the_servers_own() -> None:
    live = {"status": {"conditions": [*CONDITIONS, {"type": "C", "status": "True"}]}}
    patch = {
        "status": {
            "$setElementOrder/conditions": [{"type": "A"}, {"type": "Ready"}, {"type": "B"}],
            "conditions": [{"type": "B", "status": "True"}],
        }
    }
    out = strategic_merge_patch(live, patch)
    # C, the server's own (not in the order list), follows the named items the live list had before it
    # and B, which the live list lacked.
    assert [c["type"] for c in out["status"]["conditions"]] == ["A", "Ready", "B", "C"]


def test_json_patch_operations_and_errors() -> None:
    doc = {"a": [1, 2], "b": {"c": 1}}
    out = json_patch(
        doc,
        [
            {"op": "add", "path": "/a/-", "value": 3},
            {"op": "move", "from": "/b/c", "path": "/d"},
            {"op": "copy", "from": "/d", "path": "/e"},
            {
                "op": "replace",
                "path": "/b/new",
                "value": True,
            },  # evanphx/json-patch: replace adds a missing key
            {"op": "test", "path": "/a/2", "value": 3},
        ],
    )
    assert out == {"a": [1, 2, 3], "b": {"new": True}, "d": 1, "e": 1}
    for ops in (
        [{"op": "remove", "path": "/zz"}],
        [{"op": "test", "path": "/a/0", "value": 9}],
        [{"op": "nope", "path": "/a"}],
    ):
        with pytest.raises(PatchError):
            json_patch(doc, ops)


def test_store_history_too_old_and_monotonic_versions() -> None:
    store = Store(history=3)
    key = ("", "configmaps")
    versions = [
        int(
            store.write(key, {"metadata": {"name": f"c{i}", "namespace": "d"}})["metadata"]["resourceVersion"]
        )
        for i in range(5)
    ]
    assert versions == sorted(versions)
    assert len(set(versions)) == 5
    assert [c.obj["metadata"]["name"] for c in store.changes_after(versions[2], key)] == ["c3", "c4"]
    with pytest.raises(TooOld):
        store.changes_after(versions[0], key)
    # The history is per resource: another resource's writes never push these out.
    for i in range(10):
        store.write(("", "events"), {"metadata": {"name": f"e{i}", "namespace": "d"}})
    assert [c.obj["metadata"]["name"] for c in store.changes_after(versions[2], key)] == ["c3", "c4"]
    removed = store.remove(key, "d", "c4")
    assert removed is not None
    assert int(removed["metadata"]["resourceVersion"]) > versions[-1]


def test_printer_column_paths_with_escaped_dots_and_filters() -> None:
    obj = {
        "metadata": {"labels": {"node.kubernetes.io/instance-type": "m5.large"}},
        "status": {"conditions": [{"type": "Other", "status": "False"}, {"type": "Ready", "status": "True"}]},
    }
    assert _jsonpath(r".metadata.labels.node\.kubernetes\.io/instance-type")(obj) == "m5.large"
    assert _jsonpath('.status.conditions[?(@.type=="Ready")].status')(obj) == "True"
    assert _jsonpath(".status.missing")(obj) is None


def test_the_serviceaccount_admission_defaults_the_name_and_waits_a_little_only_for_default() -> None:
    """kube-apiserver's ServiceAccount plugin: no serviceAccountName means "default"; the default one
    is looked up again up to 10 times (the controller may not have made it yet), another one once."""
    from sandbox.apiserver import admission
    from sandbox.apiserver.errors import ApiError

    answers: list[dict[str, Any] | None] = [None, None, None, {"metadata": {"name": "default"}}]
    looked: list[tuple[str, str]] = []
    waits: list[float] = []

    def lookup(namespace: str, name: str) -> dict[str, Any] | None:
        looked.append((namespace, name))
        return answers.pop(0) if answers else None

    pod: dict[str, Any] = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}
    admission.admit_service_account(pod, "team", lookup, waits.append)
    assert pod["spec"]["serviceAccountName"] == "default"
    assert pod["spec"]["serviceAccount"] == "default"
    assert looked == [("team", "default")] * 4
    assert len(waits) == 3
    assert all(0.1 <= w <= 0.2 for w in waits)
    assert len(set(waits)) == 1  # one interval, drawn once per request

    looked.clear()
    named: dict[str, Any] = {"metadata": {"name": "q"}, "spec": {"serviceAccountName": "robot"}}
    with pytest.raises(ApiError) as refused:
        admission.admit_service_account(named, "team", lookup, waits.append)
    assert looked == [("team", "robot")]
    assert refused.value.code == 403
    assert refused.value.message == (
        'pods "q" is forbidden: error looking up service account team/robot: serviceaccount "robot" not found'
    )

    looked.clear()
    with pytest.raises(ApiError):
        admission.admit_service_account({"metadata": {"name": "r"}, "spec": {}}, "team", lookup, waits.append)
    assert len(looked) == admission.DEFAULT_SERVICE_ACCOUNT_LOOKUPS == 10
