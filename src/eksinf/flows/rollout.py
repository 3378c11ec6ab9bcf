"""`eksinf deploy`, end to end: the plane's variants created, linked and published (deploy.py),
then, as asked, applied to the target's cluster, synced by its Argo CD, and waited for until the
plane serves (serving.py)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import EksinfError
from ..model.names import cub_cluster_kubeconfig, kubeconfig_path
from . import deploy as flow
from . import targets as target_flow
from .context import StackContext

# AWS, the Kubernetes client and requests load only when a step needs them (the mgmt plane's
# credentials check, --serve-timeout): a deploy that publishes nothing never imports them.
if TYPE_CHECKING:
    from .serving import Served


@dataclass(frozen=True)
class DeployOptions:
    plane: str
    target: str  # <space>/<target>
    variant: str = "dev"
    dry_run: bool = False
    sync: bool = True
    sync_timeout: float = 120
    argocd_namespace: str = "argocd"
    serve_timeout: float = 0  # 0: do not wait
    apply: bool = False
    force_conflicts: bool = False
    creds_check: bool = True  # mgmt plane: the controllers' Secret on the target's cluster


@dataclass(frozen=True)
class Deployed:
    report: flow.DeployReport
    applied: dict[str, Any] | None = None
    sync: dict[str, Any] | None = None
    served: Served | None = None

    def as_json(self) -> dict[str, Any]:
        body = {**self.report.to_json(), "sync": self.sync, "applied": self.applied}
        if self.served is not None:
            body["serving"] = self.served.as_json()
        return body


def deploy_plane(ctx: StackContext, opts: DeployOptions) -> Deployed:
    """Deploy, then apply, sync and wait as `opts` asks; progress to `ctx.say`."""
    say, stack = ctx.say, ctx.stack
    applied = sync = served = None
    with ctx.open_hub() as hub:
        if opts.apply:
            target_flow.target_kubeconfig(stack.root, opts.target)  # refused before any change
        if opts.plane == "mgmt" and opts.creds_check:
            check_controller_creds(ctx, opts.target)
        report = flow.deploy(
            hub,
            stack,
            plane=opts.plane,
            target=opts.target,
            variant=opts.variant,
            dry_run=opts.dry_run,
            say=say,
        )
        if opts.apply and opts.dry_run:
            say("--apply: nothing applied (dry run)")
        elif opts.apply:
            spaces = sorted([*report.existing, *report.created])
            applied = target_flow.apply_plane(
                hub, stack.root, opts.target, spaces, force=opts.force_conflicts, say=say
            )
        if not opts.dry_run and opts.sync:
            sync = target_flow.sync_after_publish(
                hub,
                stack.root,
                opts.target,
                report.published,
                opts.argocd_namespace,
                opts.sync_timeout,
                say=say,
            )
    if opts.serve_timeout > 0 and not opts.dry_run:
        from .serving import wait_serving

        served = wait_serving(
            ctx,
            opts.target,
            opts.plane,
            report.kind,
            opts.variant,
            opts.argocd_namespace,
            opts.serve_timeout,
        )
    return Deployed(report, applied, sync, served)


def check_controller_creds(ctx: StackContext, target: str) -> None:
    """The target's cluster: the kubeconfig eksinf keeps for its space, else the one `cub
    cluster up` wrote under that name (the original's convention: a cub cluster X has target
    X/target)."""
    from ..aws.creds import ack_namespace, require_secret

    space = target.partition("/")[0]
    kubeconfigs = [kubeconfig_path(ctx.stack.root, space)]
    with contextlib.suppress(EksinfError):  # not a name cub could have given a cluster
        kubeconfigs.append(cub_cluster_kubeconfig(space))
    require_secret(space, kubeconfigs, ack_namespace(ctx.stack.versions), say=ctx.say)


# ---- release publish ----------------------------------------------------------------------


@dataclass(frozen=True)
class Published:
    outcome: str  # "published" or "current"
    release: Any  # the hub's release record, or None
    sync: dict[str, Any] | None

    def as_json(self) -> dict[str, Any]:
        release = self.release.to_json() if self.release else None
        return {"outcome": self.outcome, "release": release, "sync": self.sync}


def publish_space(
    ctx: StackContext, space: str, sync: bool, argocd_namespace: str, sync_timeout: float
) -> Published:
    """Admit (exit 3 before anything is pushed), publish, then ask the target's Argo CD to
    refresh it."""
    synced = None
    with ctx.open_hub() as hub:
        flow.admit(hub, ctx.stack, space)
        outcome, release = flow.publish(hub, space)
        target = hub.get_space(space).release_target
        if outcome == "published" and target and sync:
            synced = target_flow.sync_after_publish(
                hub, ctx.stack.root, target, [space], argocd_namespace, sync_timeout, say=ctx.say
            )
    return Published(outcome, release, synced)


def releases_of(ctx: StackContext, space: str) -> list[Any]:
    """The space's releases, oldest first."""
    with ctx.open_hub() as hub:
        return list(hub.list_releases(space))


# ---- install, link-profile ------------------------------------------------------------------


@dataclass(frozen=True)
class InstallOptions:
    source: str | None = None  # configs-like dir, bundles, or an OCI prefix; default configs/
    dry_run: bool = False
    prune: bool = False
    recreate: bool = False


def install_bases(ctx: StackContext, opts: InstallOptions) -> flow.InstallReport:
    """Create or refresh every <component>-base space (a re-install merges: edits survive)."""
    with ctx.open_hub() as hub:
        return flow.install(
            hub,
            ctx.stack,
            source=opts.source,
            dry_run=opts.dry_run,
            prune=opts.prune,
            recreate=opts.recreate,
            say=ctx.say,
        )


@dataclass(frozen=True)
class LinkTable:
    bindings: list[Any]  # links.Binding
    links: list[dict[str, Any]]  # each existing link, as JSON


def link_table(ctx: StackContext, variant: str) -> LinkTable:
    """The binding table and the profile links the variant has now."""
    from ..links import load_bindings

    with ctx.open_hub() as hub:
        bindings = load_bindings(ctx.stack)
        existing = [lk.to_json() for lk in flow.profile_links(hub, ctx.stack, variant)]
    return LinkTable(bindings, existing)


def link_profile(ctx: StackContext, variant: str) -> list[flow.LinkResult]:
    """Link each bound unit to the profile variant (one link per unit pair) and resolve it."""
    with ctx.open_hub() as hub:
        return flow.link_profile(hub, ctx.stack, variant, say=ctx.say)


def unlink_profile(ctx: StackContext, variant: str) -> list[str]:
    """Remove every profile link of the variant."""
    with ctx.open_hub() as hub:
        return flow.unlink_profile(hub, ctx.stack, variant, say=ctx.say)
