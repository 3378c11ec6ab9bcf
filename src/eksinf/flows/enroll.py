"""Enrolling a cluster end to end: the cluster half (aws/enroll.py), then the hub half.

The cluster is wired first, so a refused apply leaves no hub half behind; the hub half is the
target space, its OCI target and apps space, and the placeholder gate (deploy.ensure_target_space).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..aws import contract
from ..aws import enroll as cluster
from ..aws.contract import ContractReport
from ..aws.enroll import ClusterAccess
from ..errors import EksinfError
from ..hub import open_hub
from ..kube.client import KubeClient
from ..links import load_bindings
from ..model.names import apps_space, kubeconfig_path, owner_labels
from ..model.targets import HYPERPOD_GROUPS, TargetKind, kind_labels, target_kind
from .context import StackContext
from .deploy import ensure_target_space
from .targets import oci_credentials


def contract_table(kind: str) -> list[dict[str, str]]:
    """The contract rules of a target kind, as rows (name, severity, anchor, summary)."""
    return contract.table(target_kind(kind).name)


def contract_markdown(kind: str) -> str:
    """The rules table docs/contract.md (or docs/hyperpod.md) carries."""
    return contract.markdown(target_kind(kind).name)


@dataclass(frozen=True)
class EnrollOptions:
    name: str
    kind: str
    eks_cluster: str | None = None
    hyperpod_cluster: str | None = None
    kubeconfig: Path | None = None
    context: str | None = None
    grant_access: bool = False
    oci_registry: str | None = None
    argocd_namespace: str = "argocd"
    install_argocd: bool = True
    argocd_timeout: float = 300
    wait_enablement: int | None = None  # None: the HyperPod enablement window


@dataclass(frozen=True)
class Checked:
    """The contract judged; `wire` goes on only when nothing is missing."""

    opts: EnrollOptions
    kind: TargetKind
    cluster: str
    access: ClusterAccess
    report: ContractReport

    @property
    def missing(self) -> list[str]:
        return contract.missing_lines(self.report)

    def refusal(self) -> EksinfError:
        return EksinfError(
            f"cluster {self.cluster} does not meet the contract "
            f"({len(self.report.violations)} element(s) missing); nothing was wired",
            hint=f"Apply the fixes above and re-run; see {self.kind.docs}.",
            exit_code=3,
        )


def check(ctx: StackContext, opts: EnrollOptions) -> Checked:
    """Judge the cluster against the contract (installing Argo CD when absent and allowed;
    granting access with `grant_access`); progress to `ctx.say`."""
    chosen = target_kind(opts.kind)
    stack = ctx.stack
    scope = contract.with_cluster(ctx.scope, opts.eks_cluster, ctx.aws.region)
    expected, window = None, 0
    if chosen.capacity == HYPERPOD_GROUPS:  # the profile's spec.hyperpod, before any AWS call
        from ..aws.contract import hyperpod

        expected = hyperpod.expected(ctx.profile, stack.versions, opts.hyperpod_cluster)
        wait = opts.wait_enablement
        window = hyperpod.ENABLEMENT_WINDOW if wait is None else wait
    session = ctx.session_for(scope)
    access = cluster.cluster_access(
        stack.root, opts.name, scope, session, opts.kubeconfig, opts.context
    )
    needs = contract.stack_needs(stack.configs_dir, ctx.profile.spec, load_bindings(stack))
    report = contract.check_cluster(
        session,
        scope,
        needs,
        access.kube,
        grant=opts.grant_access,
        argocd_namespace=opts.argocd_namespace,
        install_argocd=opts.install_argocd,
        kind=chosen,
        hyperpod=expected,
        enablement_wait=window,
        say=ctx.say,
    )
    return Checked(opts, chosen, scope.cluster, access, report)


@dataclass(frozen=True)
class Wired:
    cluster: str
    name: str
    wiring: dict[str, Any]


def wire(ctx: StackContext, checked: Checked) -> Wired:
    """Wire the cluster that met the contract (installing Argo CD when absent, unless told not
    to) and keep its kubeconfig, then create the hub half, recording the target's kind.
    Idempotent; the cluster first, so a refused apply leaves no hub half behind."""
    opts, root = checked.opts, ctx.stack.root
    registry = opts.oci_registry or ctx.stack.versions.get("REGISTRY", "")
    wiring = cluster.wire(
        opts.name,
        checked.access,
        registry,
        opts.argocd_namespace,
        oci_credentials(),
        root / "configs" if opts.install_argocd else None,
        ctx.say,
        opts.argocd_timeout,
    )
    target = hub_target(root, opts.name, registry, checked.kind, ctx.hub_backend)
    return Wired(
        checked.cluster, opts.name, {**wiring, "target": target, "kind": checked.kind.name}
    )


@dataclass(frozen=True)
class DetachOptions:
    name: str
    kubeconfig: Path | None = None
    context: str | None = None
    argocd_namespace: str = "argocd"
    delete_spaces: bool = False


@dataclass(frozen=True)
class Detached:
    removed: list[str]
    unreachable: str | None  # why the cluster could not be reached (its wiring stays)
    deleted_spaces: list[str]


def detach(ctx: StackContext, opts: DetachOptions) -> Detached:
    """Remove the root app (orphaning workloads) and its repo-creds Secret; with
    `delete_spaces`, the hub's apps and target spaces."""
    stack = ctx.stack
    path = opts.kubeconfig or kubeconfig_path(stack.root, opts.name)
    removed: list[str] = []
    unreachable = None
    session = ctx.session  # an AWS failure fails the command; an unreachable cluster does not
    try:
        kube = KubeClient.from_kubeconfig(Path(path), session, opts.context)
        kube.version()
    except EksinfError as exc:
        unreachable = exc.message
    else:
        removed = cluster.detach(kube, opts.name, opts.argocd_namespace)
    spaces = delete_hub_spaces(stack.root, opts.name, ctx.hub_backend) if opts.delete_spaces else []
    return Detached(removed, unreachable, spaces)


def hub_target(
    stack_root: Path, name: str, registry: str, kind: TargetKind, backend: str | None = None
) -> str:
    """Create (idempotently) the target space, its OCI target and apps space in the hub."""
    with open_hub(stack_root, backend) as hub:
        ensure_target_space(hub, name, registry, owner_labels(Cluster=name, **kind_labels(kind)))
    return f"{name}/target"


def delete_hub_spaces(stack_root: Path, name: str, backend: str | None = None) -> list[str]:
    """Remove the apps space, then the target space (recursive, never forced)."""
    gone = []
    with open_hub(stack_root, backend) as hub:
        for space in (apps_space(name), name):
            if hub.space_exists(space):
                hub.delete_space(space, recursive=True)
                gone.append(space)
    return gone
