"""Fault injection for moto's CreateFleet: insufficient capacity per offering, and throttling.

moto's CreateFleet never returns ``Errors`` and gives all capacity to the first override, so the
ICE and retry paths of the provisioner could never run against it. This module patches moto
in-process (``ThreadedMotoServer`` serves from the same process, so the patch reaches server mode):

* **Insufficient capacity.** Before moto builds the fleet, every override whose
  (instance type, zone, capacity type) is faulted is removed and reported in the response's
  ``Errors`` with ``ErrorCode: InsufficientInstanceCapacity``, as EC2 reports it; the remaining
  overrides are tried in the order given (moto gives the capacity to the first one left). When no
  override is left, the fleet launches nothing and ``Instances`` is empty. The zone of an override
  is its ``AvailabilityZone`` or the zone of its ``SubnetId``; the capacity type is the fleet's
  ``DefaultTargetCapacityType``.
* **Throttling.** The next N calls of an operation answer HTTP 503 ``RequestLimitExceeded``, the
  code and status EC2 uses; botocore retries it in every retry mode (legacy mode matches the code
  *and* the 503, standard/adaptive mode match the code).

One :class:`FaultInjector` is active per process (moto's backends are process-global too).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from xml.sax.saxutils import escape

from sandbox.apiserver.errors import FLOW_CONTROL_REJECTED
from sandbox.aws.fleet_network import fleet_error, template_data

ICE_CODE = "InsufficientInstanceCapacity"
THROTTLE_CODE = "RequestLimitExceeded"
THROTTLEABLE = frozenset({"CreateFleet"})  # the operations whose moto handler is patched


@dataclass(frozen=True)
class Offering:
    instance_type: str
    zone: str
    capacity_type: str  # "spot" | "on-demand"


class FaultInjector:
    """The faults currently injected; thread-safe, read by the patched moto code on every call."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ice: set[Offering] = set()
        self._throttles: dict[str, int] = {}
        self.ice_reported = 0
        self.throttled = 0

    def insufficient_capacity(self, instance_type: str, zone: str, capacity_type: str = "on-demand") -> None:
        """Make CreateFleet report InsufficientInstanceCapacity for this offering until cleared."""
        if capacity_type not in ("spot", "on-demand"):
            raise ValueError(f"capacity_type={capacity_type!r}: use 'spot' or 'on-demand'")
        with self._lock:
            self._ice.add(Offering(instance_type, zone, capacity_type))

    def restore_capacity(self, instance_type: str, zone: str, capacity_type: str = "on-demand") -> None:
        with self._lock:
            self._ice.discard(Offering(instance_type, zone, capacity_type))

    def throttle(self, operation: str = "CreateFleet", times: int = 1) -> None:
        """Answer the next ``times`` calls of ``operation`` with 503 RequestLimitExceeded."""
        if operation not in THROTTLEABLE:
            raise ValueError(
                f"operation={operation!r} cannot be throttled; use one of {sorted(THROTTLEABLE)}"
            )
        if times < 0:
            raise ValueError(f"times={times}: give a count >= 0")
        with self._lock:
            self._throttles[operation] = times

    def clear(self) -> None:
        with self._lock:
            self._ice.clear()
            self._throttles.clear()

    @property
    def throttling(self) -> bool:
        """Whether some throttled calls are still to come."""
        with self._lock:
            return any(left > 0 for left in self._throttles.values())

    def unavailable_offerings(self) -> frozenset[Offering]:
        with self._lock:
            return frozenset(self._ice)

    def is_unavailable(self, offering: Offering) -> bool:
        with self._lock:
            return offering in self._ice

    def take_throttle(self, operation: str) -> bool:
        """True (and one fewer left) when this call of ``operation`` must be throttled."""
        with self._lock:
            left = self._throttles.get(operation, 0)
            if left <= 0:
                return False
            self._throttles[operation] = left - 1
            self.throttled += 1
            return True


# --- the moto patch --------------------------------------------------------------------------


class _Installed:
    """The injector moto's patched methods consult (module state without ``global``)."""

    injector: FaultInjector | None = None


_originals: dict[str, Callable[..., Any]] = {}
_install_lock = threading.Lock()
# The backend call and the response method run on the same server thread: hand the errors over here.
_pending = threading.local()


def _throttle_response(operation: str) -> tuple[str, dict[str, Any]]:
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error>'
        f"<Code>{THROTTLE_CODE}</Code><Message>{escape(f'Request limit exceeded. ({operation})')}</Message>"
        "</Error></Errors><RequestID>sandbox-throttle</RequestID></Response>"
    )
    return body, {"status": 503, "Content-Type": "text/xml"}


def _override_offering(
    backend: Any, template_data: dict[str, Any], override: dict[str, Any], capacity_type: str
):
    instance_type = override.get("InstanceType") or template_data.get("InstanceType")
    zone = override.get("AvailabilityZone")
    subnet_id = override.get("SubnetId") or template_data.get("SubnetId")
    if not zone and subnet_id:
        zone = backend.get_subnet(subnet_id).availability_zone
    return Offering(str(instance_type), str(zone or ""), capacity_type)


def _filter_configs(
    backend: Any, injector: FaultInjector, configs: list[dict[str, Any]], capacity_type: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Split the launch template configs into the overrides still available and EC2-shaped errors."""
    kept: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    for config in configs:
        spec = config.get("LaunchTemplateSpecification", {})
        data = template_data(backend, spec)
        available = []
        for override in config.get("Overrides") or [{}]:
            offering = _override_offering(backend, data, override, capacity_type)
            if injector.is_unavailable(offering):
                message = (
                    f"We currently do not have sufficient {offering.instance_type} capacity in the "
                    f"Availability Zone you requested ({offering.zone}). "
                    "Our system will be working on provisioning additional capacity."
                )
                errors.append(fleet_error(spec, override, capacity_type, ICE_CODE, message))
            else:
                available.append(override)
        if available:
            kept.append({**config, "Overrides": available})
    return kept, errors


def _patched_backend_create_fleet(self: Any, *args: Any, **kwargs: Any) -> Any:
    injector = _Installed.injector
    original = _originals["backend"]
    if injector is None:
        return original(self, *args, **kwargs)
    spec = dict(kwargs["target_capacity_specification"] or {})
    capacity_type = spec.get("DefaultTargetCapacityType") or "on-demand"
    kept, errors = _filter_configs(self, injector, kwargs["launch_template_configs"] or [], capacity_type)
    _pending.errors = errors
    if errors:
        injector.ice_reported += len(errors)
    if not kept:  # nothing left to try: launch nothing, as EC2 does when every override is out of capacity
        spec.update(TotalTargetCapacity=0, OnDemandTargetCapacity=0, SpotTargetCapacity=0)
    kwargs.update(launch_template_configs=kept, target_capacity_specification=spec)
    return original(self, *args, **kwargs)


def _patched_response_create_fleet(self: Any) -> Any:
    injector = _Installed.injector
    if injector is not None and injector.take_throttle("CreateFleet"):
        return _throttle_response("CreateFleet")
    _pending.errors = []
    result = _originals["response"](self)
    errors = getattr(_pending, "errors", [])
    _pending.errors = []
    if errors and hasattr(result, "result") and isinstance(result.result, dict):
        result.result["Errors"] = [*(result.result.get("Errors") or []), *errors]  # fleet_network's too
    return result


def install(injector: FaultInjector) -> None:
    """Patch moto so that ``injector`` decides CreateFleet's faults; one injector per process."""
    from moto.ec2.models import EC2Backend
    from moto.ec2.responses.fleets import Fleets

    with _install_lock:
        if _Installed.injector is not None and _Installed.injector is not injector:
            raise RuntimeError("another FaultInjector is installed; stop the other Sandbox first")
        if not _originals:
            # EC2Backend inherits create_fleet from FleetsBackend: shadow it; uninstall deletes the shadow.
            _originals["backend"] = EC2Backend.create_fleet
            _originals["response"] = Fleets.create_fleet
            EC2Backend.create_fleet = _patched_backend_create_fleet
            Fleets.create_fleet = _patched_response_create_fleet
        _Installed.injector = injector


def uninstall(injector: FaultInjector) -> None:
    """Undo :func:`install` (a no-op when ``injector`` is not the active one)."""
    from moto.ec2.models import EC2Backend
    from moto.ec2.responses.fleets import Fleets

    with _install_lock:
        if _Installed.injector is not injector:
            return
        _Installed.injector = None
        if _originals:
            del EC2Backend.create_fleet
            Fleets.create_fleet = _originals.pop("response")
            _originals.clear()


# --- the Kubernetes API server's faults -----------------------------------------------------------

API_FAULT_KINDS = ("conflict", "throttle", "error", "slow", "down")


@dataclass
class ApiFault:
    """One kind of trouble the API emulator answers the functions' requests with.

    * ``conflict``: 409 Conflict to writes guarded by a resourceVersion (a PUT, or a PATCH whose
      body names one), as when another writer got there first;
    * ``throttle``: API Priority and Fairness's 429, plain text with ``Retry-After`` (the request never ran);
    * ``error``: 500 InternalError;
    * ``slow``: the answer comes ``delay`` seconds late (a server or network under load);
    * ``down``: the connection is closed without an answer (a server that is down or restarting).

    ``times``: how many requests it hits (None: until cleared); ``methods``: only these verbs.
    """

    kind: str
    times: int | None = None
    retry_after: int = 1
    delay: float = 0.0
    methods: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if self.kind not in API_FAULT_KINDS:
            raise ValueError(f"kind={self.kind!r}: use one of {', '.join(API_FAULT_KINDS)}")


class ApiServerFaults:
    """The faults the API emulator applies to one identity's requests (the functions'), so the
    simulated scheduler, kubelets and controllers — other clients of the same server — keep working.

    The emulator calls :meth:`answer` before routing each request; it returns None (serve it), a
    ``(status, body, headers)`` to answer instead, ``"drop"`` to close the connection, or a delay.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: list[ApiFault] = []
        self.target_tokens: set[str] = set()
        self.hits: dict[str, int] = {}

    def add(self, fault: ApiFault) -> None:
        with self._lock:
            self._faults.append(fault)

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()

    @property
    def active(self) -> bool:
        with self._lock:
            return bool(self._faults)

    @property
    def in_effect(self) -> bool:
        """Whether some fault still has requests to hit (one with ``times`` used up is spent)."""
        with self._lock:
            return any(f.times is None or f.times > 0 for f in self._faults)

    def answer(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Any:
        if not self._faults:
            return None
        token = headers.get("authorization", "").removeprefix("Bearer ").strip()
        if token not in self.target_tokens:
            return None
        with self._lock:
            for fault in self._faults:
                if fault.methods and method not in fault.methods:
                    continue
                if fault.kind == "conflict" and not _guarded_write(method, body):
                    continue
                if fault.times is not None:
                    if fault.times <= 0:
                        continue
                    fault.times -= 1
                self.hits[fault.kind] = self.hits.get(fault.kind, 0) + 1
                return _fault_answer(fault, method, path)
        return None


def _guarded_write(method: str, body: bytes) -> bool:
    if method == "PUT":
        return True
    return method == "PATCH" and b'"resourceVersion"' in body


def _status(code: int, reason: str, message: str, **details: Any) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "details": details,
        "code": code,
    }


def _fault_answer(fault: ApiFault, method: str, path: str) -> Any:
    if fault.kind == "down":
        return "drop"
    if fault.kind == "slow":
        return fault.delay
    if fault.kind == "conflict":
        message = (
            f"Operation cannot be fulfilled on {path}: the object has been modified; "
            "please apply your changes to the latest version and try again"
        )
        return 409, _status(409, "Conflict", message), {}
    if fault.kind == "throttle":
        # API Priority and Fairness answers before any serializer is chosen: Go's plain-text
        # http.Error, not a Status (sandbox.apiserver.flowcontrol gives the same answer under load).
        headers = {"Retry-After": str(fault.retry_after), "X-Content-Type-Options": "nosniff"}
        return 429, FLOW_CONTROL_REJECTED, headers
    return (
        500,
        _status(500, "InternalError", f"Internal error occurred: injected fault ({method} {path})"),
        {},
    )
