"""The removal at ``cdk destroy``: nothing of Nodewright is left, in the cluster or in AWS.

The stack's removal custom resource runs ``functions/cleanup`` when CloudFormation deletes it: after
the functions and every trigger are gone (nothing launches any more), before the node role, the
nodes' access entry and the cleanup's own access entry go (infra/autoscaler.py orders them).
:func:`run` then, in this order:

1. **The webhooks** (``cluster.install.uninstall_webhooks``): the wake-up's
   ValidatingWebhookConfiguration is deleted and the NodePool and EC2NodeClass CRDs serve ``v1``
   only, without a conversion webhook. Nothing in the cluster names the stack's URL any more, so
   no request (a v1beta1 read, a GitOps sync, a pod's status write) waits on a dead URL or gets an
   error that carries its secret.
2. **The nodes** (``termination``, the path every flow takes): every NodeClaim, and the Node of
   every instance Nodewright launched, is cordoned and drained through the Eviction API
   (PodDisruptionBudgets honoured, ``karpenter.sh/do-not-disrupt`` pods too: the node goes
   regardless) until the drain deadline: ``DRAIN_SECONDS``, or sooner when the invocation's time
   or the NodeClaim's own ``terminationGracePeriod`` says so. What is still there then is deleted,
   the instance terminated, and the Node's and NodeClaim's finalizers released, so no object is
   left stuck on a finalizer nobody will remove.
3. **AWS** (``cloud.cleanup.remove_cluster_resources``): any instance of the cluster still running
   is terminated, then its launch templates and instance profiles are deleted (the profiles once
   no live instance uses them, so the node role can be deleted next).

Each step runs even when an earlier one failed (a cluster deleted before the stack still gets its
instances terminated), and what failed is reported with what is left and the command that removes
it. Every step is idempotent and reads its state back from the cluster and EC2, so a retried
Delete (Lambda retries a failed asynchronous invocation) resumes where the first stopped; NodeClaims
marked by the first keep the deadline it recorded. The report goes to the log, to CloudFormation
(the custom resource's reason) and to an SSM parameter that outlives the stack.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from nodewright import termination
from nodewright.cluster import objects
from nodewright.state.views import ClaimView, NodeView, by_instance_id

if TYPE_CHECKING:
    from nodewright.cloud.cleanup import CloudRemoval
    from nodewright.cluster import Cluster
    from nodewright.context import Context
    from nodewright.settings import Settings

# The drain's bound (a NodeClaim's terminationGracePeriod may make it shorter): long enough for
# PodDisruptionBudgets to let a workload move, short enough that the whole removal fits in the
# function's timeout (15 minutes, infra/capabilities/removal.py) with the reserves below.
DRAIN_SECONDS = 600.0
# After the drain deadline: the passes that delete what is still there and finish each node.
FINISH_SECONDS = 60.0
# The AWS part (terminate what is left, delete launch templates and instance profiles).
AWS_SECONDS = 120.0
# The report (SSM) and the answer to CloudFormation, whose PUT may take 30 s.
ANSWER_SECONDS = 45.0
# Between two tries of a drain a transient API error interrupted.
RETRY_WAIT = timedelta(seconds=5)
REASON = "Nodewright removed (cdk destroy)"


@dataclass
class RemovalReport:
    """What the removal did, and what is left with the command that removes it."""

    cluster_name: str
    stack_id: str = ""
    webhooks: list[str] = field(default_factory=list)  # as kubectl says it
    nodes_removed: list[str] = field(default_factory=list)
    nodeclaims_removed: list[str] = field(default_factory=list)
    pods_evicted: int = 0
    pods_deleted_at_deadline: int = 0
    instances_terminated: list[str] = field(default_factory=list)  # by their node's termination
    cloud: CloudRemoval | None = None
    left: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.left and not self.problems

    def as_dict(self) -> dict[str, Any]:
        cloud = self.cloud
        return {
            "cluster": self.cluster_name,
            "stack": self.stack_id,
            "finished": objects.format_time(datetime.now(UTC)),
            "complete": self.complete,
            "left": self.left,
            "problems": self.problems,
            "webhooks": self.webhooks,
            "podsEvicted": self.pods_evicted,
            "podsDeletedAtDeadline": self.pods_deleted_at_deadline,
            "nodes": self.nodes_removed,
            "nodeClaims": self.nodeclaims_removed,
            "instancesTerminated": self.instances_terminated + (cloud.instances_terminated if cloud else []),
            "instancesWithoutANode": cloud.instances_terminated if cloud else [],
            "launchTemplatesDeleted": cloud.launch_templates_deleted if cloud else [],
            "instanceProfilesDeleted": cloud.instance_profiles_deleted if cloud else [],
        }

    def summary(self) -> str:
        """One paragraph for CloudFormation's reason and the log."""
        cloud = self.cloud
        done = [
            "; ".join(self.webhooks) or "webhooks not checked",
            f"{len(self.nodes_removed)} node(s) and {len(self.nodeclaims_removed)} NodeClaim(s) removed "
            f"({self.pods_evicted} pod(s) evicted, {self.pods_deleted_at_deadline} deleted at the "
            "drain deadline)",
        ]
        swept = cloud.instances_terminated if cloud else []
        done.append(
            f"{len(self.instances_terminated) + len(swept)} instance(s) terminated "
            f"({len(swept)} without a node)"
        )
        if cloud is not None:
            done.append(
                f"{len(cloud.launch_templates_deleted)} launch template(s) and "
                f"{len(cloud.instance_profiles_deleted)} instance profile(s) deleted"
            )
        text = "Removed: " + "; ".join(done) + "."
        if not self.complete:
            text += " LEFT (see docs/deploy.md, 'Removing it'): " + " | ".join(self.problems + self.left)
        return text


def run(settings: Settings, *, seconds: float, stack_id: str, logger: Any, metrics: Any) -> RemovalReport:
    """The whole removal within ``seconds`` (the invocation's remaining time); never raises."""
    from nodewright import cluster
    from nodewright.cloud.cleanup import remove_cluster_resources
    from nodewright.cloud.provider import CloudProvider
    from nodewright.context import Context

    started = time.monotonic()
    report = RemovalReport(cluster_name=settings.cluster_name, stack_id=stack_id)
    cloud = CloudProvider(settings)
    api: Cluster | None = None
    try:
        api = cluster.connect(settings)
        # No cluster call eats into the answer's time, however slow the API server is.
        api.set_call_deadline(started + seconds - ANSWER_SECONDS)
    except Exception as exc:  # a cluster deleted before the stack: AWS is still cleaned up
        report.problems.append(_unreachable(settings, exc))
    ctx = None
    if api is not None:
        ctx = Context(settings=settings, cluster=api, cloud=cloud, store=None, logger=logger, metrics=metrics)
        take_out_webhooks(api, report)
        drain_seconds = min(DRAIN_SECONDS, seconds - FINISH_SECONDS - AWS_SECONDS - ANSWER_SECONDS)
        try:
            drain_nodes(ctx, report, drain_until=ctx.clock.now() + timedelta(seconds=max(0.0, drain_seconds)))
        except Exception as exc:  # the AWS part still terminates the instances
            report.problems.append(f"the drain stopped ({_error(exc)}); instances are terminated anyway")
    try:
        report.cloud = remove_cluster_resources(cloud)
        report.left += report.cloud.left(settings)
    except Exception as exc:
        report.problems.append(f"AWS cleanup failed ({_error(exc)}): {_aws_commands(settings)}")
    if ctx is not None:
        _left_in_cluster(ctx, report)
    return report


def take_out_webhooks(api: Cluster, report: RemovalReport) -> None:
    """Step 1 of the module docstring (``cluster.install.uninstall_webhooks``)."""
    from nodewright.cluster.install import uninstall_webhooks

    try:
        report.webhooks = uninstall_webhooks(api)
    except Exception as exc:
        report.problems.append(
            f"the webhooks were not taken out ({_error(exc)}): nodewright install-webhooks --cluster "
            f"{report.cluster_name} --uninstall"
        )


def drain_nodes(ctx: Context, report: RemovalReport, *, drain_until: datetime) -> None:
    """Ask for the termination of every node Nodewright launched, bounded by ``drain_until``, and
    drive them (``termination.reconcile``); see step 2.

    A transient error (the API server busy or briefly unreachable) is waited out until the finish
    window ends; any other, or the end of that window, finishes the nodes left at once
    (``termination.finish_now``). A Lambda timeout finishes nothing: the retried Delete resumes."""
    terms = _terminations(ctx, drain_until)
    stop_at = drain_until + timedelta(seconds=FINISH_SECONDS)
    try:
        while True:
            try:
                budget = (stop_at - ctx.clock.now()).total_seconds()
                termination.reconcile(ctx, None, asked=terms, budget_seconds=max(0.0, budget))
                break
            except Exception as exc:
                if not getattr(exc, "transient", False) or ctx.clock.now() + RETRY_WAIT >= stop_at:
                    raise
                ctx.logger.warning("drain interrupted; retrying", extra={"error": _error(exc)})
                ctx.clock.sleep(RETRY_WAIT.total_seconds())
    except Exception:
        _finish(ctx, report, terms)
        raise
    _finish(ctx, report, terms)


def _finish(ctx: Context, report: RemovalReport, terms: list[termination.Termination]) -> None:
    """Finish at once what is not done, and count what was."""
    for term in terms:
        if not term.done:
            try:
                termination.finish_now(ctx, term)
            except Exception as exc:  # reported as left by _left_in_cluster
                ctx.logger.warning("node not removed", extra={"node": term.node, "error": _error(exc)})
        report.pods_evicted += len(term.evicted)
        report.pods_deleted_at_deadline += len(term.deleted)
        if term.done:
            report.nodes_removed += [term.node] if term.node else []
            report.nodeclaims_removed += [term.nodeclaim] if term.nodeclaim else []
            report.instances_terminated += [term.instance_id] if term.instance_id else []


def _terminations(ctx: Context, drain_until: datetime) -> list[termination.Termination]:
    """A termination for every NodeClaim (resumed when already deleting) and for every Node of a
    Nodewright instance that no NodeClaim names, each bounded by ``drain_until``."""
    now = ctx.clock.now()
    nodes = [NodeView.of(n) for n in ctx.cluster.list_nodes()]
    by_instance = by_instance_id(nodes)
    by_name = {n.name: n for n in nodes}
    asked = termination.TerminationRequest(REASON, involuntary=True, deadline=drain_until)
    terms = []
    for claim in map(ClaimView.of, ctx.cluster.list_nodeclaims()):
        instance_id = claim.instance_id
        node = by_instance.get(instance_id or "") or by_name.get(claim.node_name or "")
        if claim.deleting:
            terms.append(termination.resume(claim, node, now))
        else:
            terms.append(
                termination.request(
                    ctx,
                    nodeclaim=claim.raw,
                    node=node.raw if node else None,
                    instance_id=instance_id,
                    asked=asked,
                )
            )
    named = {t.node for t in terms}
    ours = {instance.id for instance in ctx.cloud.list()}
    for node in nodes:
        if node.name not in named and node.instance_id in ours:
            terms.append(
                termination.request(
                    ctx, nodeclaim=None, node=node.raw, instance_id=node.instance_id, asked=asked
                )
            )
    for term in terms:  # the node goes regardless, by the removal's deadline at the latest
        term.hasten(drain_until)
    return terms


def _left_in_cluster(ctx: Context, report: RemovalReport) -> None:
    """NodeClaims and Nodewright nodes still in the cluster, with the commands that remove them."""
    try:
        claims = [objects.name_of(c) for c in ctx.cluster.list_nodeclaims()]
        ours = {i.id for i in ctx.cloud.list()}
        nodes = [objects.name_of(n) for n in ctx.cluster.list_nodes() if objects.node_instance_id(n) in ours]
    except Exception as exc:
        report.problems.append(f"could not check the cluster for what is left ({_error(exc)})")
        return
    finalizer = '{"metadata":{"finalizers":null}}'
    if claims:
        report.left.append(
            f"NodeClaims {', '.join(claims)}: kubectl delete nodeclaim NAME, then if it stays, "
            f"kubectl patch nodeclaim NAME --type merge -p '{finalizer}'"
        )
    if nodes:
        report.left.append(
            f"nodes {', '.join(nodes)}: kubectl drain NAME --ignore-daemonsets --delete-emptydir-data, "
            "kubectl delete node NAME, then if it stays, "
            f"kubectl patch node NAME --type merge -p '{finalizer}'"
        )


def _unreachable(settings: Settings, exc: BaseException) -> str:
    name = settings.cluster_name
    return (
        f"the cluster could not be reached ({_error(exc)}): nothing in it was changed. If it still exists: "
        f"nodewright install-webhooks --cluster {name} --uninstall, kubectl delete nodeclaims --all"
    )


def _aws_commands(settings: Settings) -> str:
    name, region = settings.cluster_name, settings.region
    return (
        f"aws ec2 describe-instances --filters Name=tag:eks:eks-cluster-name,Values={name} "
        "Name=tag-key,Values=karpenter.sh/nodeclaim, then aws ec2 terminate-instances; "
        f"aws ec2 describe-launch-templates --filters Name=tag:karpenter.k8s.aws/cluster,Values={name}, then "
        "aws ec2 delete-launch-template; "
        f"aws iam list-instance-profiles --path-prefix /nodewright/{region}/{name}/, "
        "then remove-role-from-instance-profile and delete-instance-profile"
    )


def _error(exc: BaseException) -> str:
    """The error in a line; a Kubernetes 403 says which RBAC is missing."""
    from nodewright.cluster.errors import ApiError

    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, ApiError) and exc.status == 403:
        text += " (apply deploy/rbac.yaml: its ClusterRole nodewright-cleanup)"
    return text[:400]
