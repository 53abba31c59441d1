"""Path routing: discovery documents, then ``/api/v1/...`` and ``/apis/<group>/<version>/...`` resources.

Unknown resources in a built-in group version answer a JSON ``Status`` 404; paths of groups nobody
serves (e.g. after the last CRD of a group is deleted) answer Go's plain-text ``404 page not found``.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable

from . import discovery, errors, eviction, openapi, rbac, tables, watch
from .errors import ApiError
from .flowcontrol import FlowControl, Rejected
from .handlers import Context, Request, ResourceHandlers, Response, Target, decode_body
from .resources import Registry
from .storage import Store
from .strategies import strategy_for

# How a request without credentials is treated. ``eks``: Amazon EKS from Kubernetes 1.32 (anonymous
# authentication restricted to the health checks: any other path is a 401; the user guide's "Anonymous
# authentication changes"). ``kube-apiserver``: kube-apiserver's default ``--anonymous-auth=true``
# (every such request is system:anonymous in system:unauthenticated, and RBAC decides: a 403 where
# no rule allows it; the bootstrap policy's system:public-info-viewer lets it read /version too).
ANONYMOUS_EKS = "eks"
ANONYMOUS_KUBE_APISERVER = "kube-apiserver"
ANONYMOUS_MODES = (ANONYMOUS_EKS, ANONYMOUS_KUBE_APISERVER)
EKS_ANONYMOUS_PATHS = frozenset({"/healthz", "/livez", "/readyz"})
ANONYMOUS = rbac.Identity("system:anonymous", (rbac.UNAUTHENTICATED,))
IMPERSONATE_EXTRA = "impersonate-extra-"
AUTHENTICATION_GROUP = "authentication.k8s.io"


class Router:
    def __init__(
        self,
        store: Store,
        registry: Registry,
        identities: dict[str, rbac.Identity],
        address: Callable[[], str],
        stopping: Callable[[], bool],
        *,
        anonymous: str = ANONYMOUS_EKS,
        flow_control: FlowControl | None = None,
    ) -> None:
        """``flow_control``: API Priority and Fairness (kube-apiserver's defaults when None)."""
        if anonymous not in ANONYMOUS_MODES:
            raise ValueError(f"anonymous={anonymous!r}: use one of {', '.join(ANONYMOUS_MODES)}")
        self.anonymous = anonymous
        self.store = store
        self.registry = registry
        self.identities = identities
        self.authorizer = rbac.Authorizer(store)
        self.address = address
        self.stopping = stopping
        self.handlers = ResourceHandlers(store, registry)
        self.flow_control = flow_control or FlowControl(count=store.count)

    def handle(self, request: Request) -> Response:
        """kube-apiserver's filter order: authentication, impersonation, API Priority and Fairness
        (a request holds its seats until its answer is written: ``Response.sent``; a watch until its
        stream is ready), then authorization and the handler. Every response APF classified carries
        its PF headers."""
        classified: dict[str, str] = {}
        try:
            identity = self._impersonate(request, self._authenticate(request))
            path = request.path.rstrip("/") or "/"
            attributes = rbac.request_attributes(identity, request.method, path, request.query)
            try:
                ticket = self.flow_control.admit(attributes, request.query)
            except Rejected as rejected:
                raise rejected.error from None
            classified = ticket.headers
            try:
                self.authorizer.authorize(attributes)
                request.identity = identity
                response = self._dispatch(request)
            except BaseException:
                ticket.release()
                raise
            if response.stream is None:
                response.sent = ticket.release
            else:
                ticket.release()
        except ApiError as exc:
            headers = {**classified, **exc.headers}
            if exc.plain:
                plain = "text/plain; charset=utf-8"
                return Response(exc.code, exc.message, headers=headers, content_type=plain)
            return Response(exc.code, exc.status(), headers=headers, warnings=exc.warnings)
        response.headers.update(classified)
        return response

    def _authenticate(self, request: Request) -> rbac.Identity:
        """The token's identity, or system:anonymous for a request without credentials where the
        ``anonymous`` mode admits one (see ``ANONYMOUS_EKS``); 401 otherwise. Credentials that are
        presented and rejected are a 401 on every path, the health checks included: kube-apiserver
        only considers anonymous access for a request without credentials (union.NewFailOnError)."""
        header = request.headers.get("authorization", "")
        scheme, _, given = header.partition(" ")
        if scheme.lower() == "bearer":
            for token, identity in list(self.identities.items()):
                if hmac.compare_digest(given.strip().encode(), token.encode()):
                    return identity
        if header:
            raise errors.unauthorized()
        path = request.path.rstrip("/") or "/"
        if self.anonymous == ANONYMOUS_EKS and path not in EKS_ANONYMOUS_PATHS:
            raise errors.unauthorized()
        return ANONYMOUS

    def _impersonate(self, request: Request, identity: rbac.Identity) -> rbac.Identity:
        """``Impersonate-User``/``-Group``/``-Uid``/``-Extra-<key>`` (the impersonation filter):
        allowed when the caller may ``impersonate`` each of them (a service account user as
        ``serviceaccounts`` in its namespace, uids and user extras in authentication.k8s.io)."""
        headers = request.headers
        user = headers.get("impersonate-user") or ""
        requested_groups = [g for g in headers.get("impersonate-group", "").split("\n") if g]
        groups = list(requested_groups)
        uid = headers.get("impersonate-uid") or ""
        extras = {
            k.removeprefix(IMPERSONATE_EXTRA): v
            for k, v in headers.items()
            if k.startswith(IMPERSONATE_EXTRA)
        }
        if not (user or groups or uid or extras):
            return identity
        if not user:
            raise errors.internal(
                "requested impersonation of groups, a uid or extras without impersonating a user"
            )

        def asks(
            resource: str, name: str, namespace: str = "", api_group: str = "", subresource: str = ""
        ) -> rbac.Attributes:
            return rbac.Attributes(
                identity,
                "impersonate",
                True,
                resource=resource,
                name=name,
                namespace=namespace,
                api_group=api_group,
                subresource=subresource,
            )

        wanted = []
        if user.startswith(rbac.SERVICE_ACCOUNT_PREFIX) and user.count(":") == 3:
            namespace, name = user.removeprefix(rbac.SERVICE_ACCOUNT_PREFIX).split(":", 1)
            wanted.append(asks("serviceaccounts", name, namespace=namespace))
            if not groups:  # a service account's groups are a fixed mapping
                groups = ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"]
        else:
            wanted.append(asks("users", user))
        wanted += [asks("groups", g) for g in requested_groups]
        wanted += [
            asks("userextras", value, api_group=AUTHENTICATION_GROUP, subresource=key)
            for key, value in extras.items()
        ]
        if uid:
            wanted.append(asks("uids", uid, api_group=AUTHENTICATION_GROUP))
        for attrs in wanted:
            allowed, _ = self.authorizer.decide(attrs)
            if not allowed:
                raise rbac.forbidden(attrs)
        extra = () if rbac.AUTHENTICATED in groups else (rbac.AUTHENTICATED,)
        return rbac.Identity(user, (*groups, *extra), uid)

    def _dispatch(self, request: Request) -> Response:
        path = request.path.rstrip("/") or "/"
        if path == "/version":
            return Response(200, dict(discovery.VERSION_INFO))
        if path in ("/healthz", "/livez", "/readyz"):
            return Response(200, "ok", content_type="text/plain; charset=utf-8")
        parts = [p for p in path.split("/") if p]
        if not parts:
            return Response(
                200, {"paths": ["/api", "/api/v1", "/apis", "/healthz", "/livez", "/readyz", "/version"]}
            )
        if parts[0] == "openapi":
            return self._openapi(request, parts[1:])
        if parts[0] == "api":
            if len(parts) == 1:
                if discovery.wants_aggregated(request.headers.get("accept", "")):
                    return self._aggregated(request, core=True)
                return self._get_only(request, lambda: discovery.api_versions(self.address()))
            if parts[1] != "v1":
                raise errors.page_not_found()
            if len(parts) == 2:
                return self._get_only(request, lambda: discovery.resource_list(self.registry, "", "v1"))
            return self._resource(request, "", "v1", parts[2:])
        if parts[0] == "apis":
            if len(parts) == 1:
                if discovery.wants_aggregated(request.headers.get("accept", "")):
                    return self._aggregated(request, core=False)
                return self._get_only(request, lambda: discovery.api_group_list(self.registry))
            group = parts[1]
            if len(parts) == 2:
                found = discovery.api_group(self.registry, group)
                if found is None:
                    raise errors.page_not_found()
                return self._get_only(request, lambda: found)
            version = parts[2]
            if not self.registry.serves_group_version(group, version):
                raise errors.page_not_found()
            if len(parts) == 3:
                return self._get_only(request, lambda: discovery.resource_list(self.registry, group, version))
            return self._resource(request, group, version, parts[3:])
        raise errors.page_not_found()

    def _openapi(self, request: Request, rest: list[str]) -> Response:
        """/openapi/v3 and its group-version documents; /openapi/v2 as JSON (not as protobuf)."""
        if rest == ["v2"]:
            if "protobuf" in request.headers.get("accept", ""):
                raise errors.page_not_found()
            return self._get_only(request, lambda: openapi.swagger(self.registry))
        if not rest or rest[0] != "v3":
            raise errors.page_not_found()
        if len(rest) == 1:
            return self._get_only(request, lambda: openapi.index(self.registry))
        if rest[1] == "api" and len(rest) == 3:
            group, version = "", rest[2]
        elif rest[1] == "apis" and len(rest) == 4:
            group, version = rest[2], rest[3]
        else:
            raise errors.page_not_found()
        doc = openapi.group_version_document(self.registry, group, version)
        if doc is None:
            raise errors.page_not_found()
        return self._get_only(request, lambda: doc)

    def _aggregated(self, request: Request, *, core: bool) -> Response:
        if request.method != "GET":
            raise errors.method_not_allowed()
        return Response(200, discovery.aggregated(self.registry, core), content_type=discovery.AGGREGATED)

    @staticmethod
    def _get_only(request: Request, body: Callable[[], object]) -> Response:
        if request.method != "GET":
            raise errors.method_not_allowed()
        return Response(200, body())

    def _not_found(self, group: str, version: str) -> ApiError:
        if self.registry.is_builtin_group(group, version):
            return errors.resource_not_found()
        return errors.page_not_found()

    def _resource(self, request: Request, group: str, version: str, rest: list[str]) -> Response:
        namespace: str | None = None
        if (
            rest[0] == "namespaces"
            and len(rest) >= 3
            and not (group == "" and len(rest) == 3 and rest[2] in ("status", "finalize"))
        ):
            namespace = rest[1]
            rest = rest[2:]
        if len(rest) > 3:
            raise self._not_found(group, version)
        plural = rest[0]
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        ctx = Context(request)
        try:
            return self._serve(
                request,
                ctx,
                group=group,
                version=version,
                namespace=namespace,
                plural=plural,
                name=name,
                sub=sub,
            )
        except ApiError as exc:
            # The warning recorder writes each Warning header as it is recorded (filters.
            # WithWarningRecorder): an error answered afterwards carries them.
            exc.warnings = [*ctx.warnings, *exc.warnings]
            raise

    def _serve(
        self,
        request: Request,
        ctx: Context,
        *,
        group: str,
        version: str,
        namespace: str | None,
        plural: str,
        name: str | None,
        sub: str | None,
    ) -> Response:
        if group == "" and plural == "bindings" and namespace and name is None and request.method == "POST":
            pods = self.registry.lookup("", "v1", "pods")
            assert pods is not None
            return eviction.bind(self.handlers, Target(pods, namespace, None, "binding"), ctx)
        rt = self.registry.lookup(group, version, plural)
        if rt is None:
            raise self._not_found(group, version)
        if rt.namespaced is False and namespace is not None:
            raise self._not_found(group, version)
        if rt.namespaced and name is not None and namespace is None:
            raise self._not_found(group, version)
        if sub is not None and sub not in rt.subresources:
            raise self._not_found(group, version)
        t = Target(rt, namespace, name, sub)
        method = request.method
        if rt.virtual:
            return self._review(t, ctx)
        if name is None:
            if method == "GET":
                if request.query.get("watch") in ("true", "1"):
                    return watch.watch(self.handlers, t, request, self.stopping)
                response = self.handlers.list(t, request)
                return tables.maybe_table(request, rt, response)
            if method == "POST":
                if namespace is None and rt.namespaced:
                    raise errors.method_not_allowed()
                return self._with_warnings(ctx, self.handlers.create(t, ctx))
            if method == "DELETE":
                return self.handlers.delete_collection(t, ctx)
            raise errors.method_not_allowed()
        if sub == "binding":
            if method != "POST":
                raise errors.method_not_allowed()
            return eviction.bind(self.handlers, t, ctx, pod_name=name)
        if sub == "eviction":
            if method != "POST":
                raise errors.method_not_allowed()
            return eviction.evict(self.handlers, t, ctx)
        if sub == "scale":
            return self._with_warnings(ctx, strategy_for(rt).scale(self.handlers, t, ctx))
        if method == "GET":
            if request.query.get("watch") in ("true", "1"):
                return watch.watch(self.handlers, t, request, self.stopping)
            return tables.maybe_table(request, rt, self.handlers.get(t))
        if method == "PUT":
            return self._with_warnings(ctx, self.handlers.update(t, ctx))
        if method == "PATCH":
            return self._with_warnings(ctx, self.handlers.patch(t, ctx))
        if method == "DELETE" and sub is None:
            return self.handlers.delete(t, ctx)
        raise errors.method_not_allowed()

    def _review(self, t: Target, ctx: Context) -> Response:
        """The create-only reviews: answered from the caller's identity and RBAC, never stored."""
        if ctx.request.method != "POST" or t.name is not None:
            raise errors.method_not_allowed()
        body = decode_body(ctx.request)
        if not isinstance(body, dict):
            raise errors.bad_request(f"the body of a create must be a {t.rt.kind} object")
        identity = ctx.request.identity or ANONYMOUS
        answer = strategy_for(t.rt).review(self.authorizer, t, body, identity)
        return Response(201, answer)

    @staticmethod
    def _with_warnings(ctx: Context, response: Response) -> Response:
        response.warnings.extend(ctx.warnings)
        return response
