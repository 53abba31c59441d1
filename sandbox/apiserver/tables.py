"""Server-side printing: ``meta.k8s.io/v1 Table`` answers for ``kubectl get``.

kubectl asks for ``Accept: application/json;as=Table;v=v1;g=meta.k8s.io``; each kind's strategy is
its TableConvertor (the columns printers.py defines, read from the object it prints).
"""

from __future__ import annotations

from typing import Any

from . import errors
from .handlers import Request, Response
from .resources import ResourceType
from .strategies import strategy_for


def wants_table(request: Request) -> bool:
    return "as=Table" in request.headers.get("accept", "")


def to_table(
    rt: ResourceType, objects: list[dict[str, Any]], list_meta: dict[str, Any], include: str = "Metadata"
) -> dict[str, Any]:
    """``include``: the request's includeObject, Metadata (default), Object (kubectl --sort-by) or None."""
    strategy = strategy_for(rt)
    columns = strategy.table_columns(rt)
    rows = []
    for obj in objects:
        printed = strategy.printed(obj)
        row: dict[str, Any] = {"cells": [getter(printed) for _, _, getter, _ in columns]}
        if include == "Object":
            row["object"] = {"kind": rt.kind, "apiVersion": rt.api_version, **obj}
        elif include != "None":
            meta = dict(obj.get("metadata") or {})
            row["object"] = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": meta,
            }
        rows.append(row)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {
            k: v for k, v in list_meta.items() if k in ("resourceVersion", "continue", "remainingItemCount")
        },
        "columnDefinitions": [
            {
                "name": name,
                "type": ctype,
                "format": "name" if name == "Name" else "",
                "description": name,
                "priority": priority,
            }
            for name, ctype, _, priority in columns
        ],
        "rows": rows,
    }


def maybe_table(request: Request, rt: ResourceType, response: Response) -> Response:
    """Turn a get/list answer into a Table when the client asked for one."""
    if not wants_table(request) or response.code != 200 or not isinstance(response.body, dict):
        return response
    body = response.body
    include = request.query.get("includeObject") or "Metadata"
    if include not in ("Metadata", "Object", "None"):
        raise errors.bad_request(
            f'includeObject: Unsupported value: "{include}": supported values: "None", "Metadata", "Object"'
        )
    if "items" in body:
        table = to_table(rt, body["items"], body.get("metadata") or {}, include)
    else:
        table = to_table(
            rt, [body], {"resourceVersion": body["metadata"].get("resourceVersion", "")}, include
        )
    return Response(200, table, headers=response.headers)
