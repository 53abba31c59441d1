"""A Kubernetes API emulator faithful enough for the kubernetes client (37.x) and kubectl (1.32).

One module per concern:

* ``server``     HTTP(S) on one port, keep-alive, chunked watches, clean stop (:class:`ApiServer`)
* ``routing``    paths to discovery, OpenAPI and resource handlers; auth; the scale subresource
* ``handlers``   get/list/create/update/patch/delete semantics (conflicts, finalizers, grace periods)
* ``storage``    thread-safe objects, one monotonic resourceVersion, change history for watches
* ``watch``      watch streams (resourceVersion replay, selector transitions, bookmarks, tables)
* ``admission``  defaults, admission plugins and validation of the built-in kinds
* ``schema``     unknown-field pruning (built-ins and CRD structural schemas), CRD defaults/validation
* ``patching``   JSON merge, strategic merge and JSON patch
* ``selectors``  label and field selectors
* ``eviction``   pods/binding and pods/eviction with PodDisruptionBudgets
* ``discovery``, ``openapi``, ``tables``   what kubectl reads: /api, /apis, /openapi/v3, Tables
* ``resources``  the registry of built-in and CRD-defined resources
* ``tls``, ``protobuf``   kubectl's transport needs: HTTPS for tokens, protobuf for create generators
* ``testing``    helpers for tests: a kubectl runner and a kubelet stand-in confirming deletions
"""

from .server import ApiServer

__all__ = ["ApiServer"]
