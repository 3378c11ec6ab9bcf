"""Hub and deploy commands: install, deploy, link-profile, fn, release, sandbox, hub. Thin:
parse, call `deploy` or the `Hub`, format."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from ..errors import USAGE, EksinfError, shell_command
from ..model.names import profile_space, variant_space
from ..model.targets import DEFAULT_KIND, KINDS, TARGET_PLANES
from .common import (
    HUB_OPTION,
    JSON_OPTION,
    MIRROR_OPTION,
    emit_json,
    one_of,
    progress,
    stack_context,
)
from .hubunits import fn_app, hub_app
from .links import binding_rows, print_binding_table

# The hub and the deploy flow pull in requests (OCI) and the hub backends: each command
# imports them when it runs, so other commands' start-up does not pay for them.
if TYPE_CHECKING:
    from ..flows.rollout import LinkTable
    from ..flows.serving import Served

VARIANT_OPTION = typer.Option(
    "dev", "--variant", help="Variant name: spaces are <component>-<variant>."
)

NO_SYNC_OPTION = typer.Option(
    False, "--no-sync", help="Do not ask the target's Argo CD to refresh after publishing."
)
SYNC_TIMEOUT_OPTION = typer.Option(
    120, "--sync-timeout", help="Seconds to wait for the refreshed Applications to sync."
)
ARGOCD_NAMESPACE_OPTION = typer.Option(
    "argocd", "--argocd-namespace", help="Argo CD's namespace on the target."
)

release_app = typer.Typer(help="Publish and list releases.", no_args_is_help=True)
sandbox_app = typer.Typer(
    help="The whole configuration on stand-in targets: no infrastructure.", no_args_is_help=True
)


def register(app: typer.Typer) -> None:
    app.command("install")(install_cmd)
    app.command("deploy")(deploy_cmd)
    app.command("link-profile")(link_profile_cmd)
    app.add_typer(fn_app, name="fn")
    app.add_typer(release_app, name="release")
    app.add_typer(sandbox_app, name="sandbox")
    app.add_typer(hub_app, name="hub")


# ---- install / deploy / link-profile ----------------------------------------------------


def install_cmd(
    ctx: typer.Context,
    source: str = typer.Option(
        None,
        "--from",
        help="configs-like dir, dir of <component>.tar.gz, or OCI prefix. Default: configs/.",
    ),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Report what would change; change nothing."
    ),
    prune: bool = typer.Option(False, "--prune", help="Empty units whose file is gone."),
    recreate: bool = typer.Option(
        False,
        "--recreate",
        help="Delete and rebuild each base (new unit IDs); refused while variants exist.",
    ),
    yes: bool = typer.Option(False, "--yes", help="Confirm --recreate (it deletes the bases)."),
    hub_choice: str = HUB_OPTION,
    json_out: bool = JSON_OPTION,
) -> None:
    """Create or refresh the <component>-base spaces (re-install merges: edits survive)."""
    from ..flows import rollout

    if recreate and not yes and not dry_run:
        dry_run = True  # destructive: show the plan, change nothing
        progress("--recreate deletes and rebuilds the bases: showing the plan; re-run with --yes")
    run = stack_context(ctx, hub=hub_choice, json_out=json_out)
    report = rollout.install_bases(run, rollout.InstallOptions(source, dry_run, prune, recreate))
    if json_out:
        emit_json(report.to_json())
        return
    counts = {"created": 0, "updated": 0, "unchanged": 0}
    for up in report.uploads:
        if up.space_created:
            state_word = "created"
        elif up.updated or up.created or up.emptied:
            state_word = "updated"
        else:
            state_word = "unchanged"
        counts[state_word] += 1
        detail = (
            f"{len(up.created)} created, {len(up.updated)} updated, {len(up.emptied)} emptied"
            if state_word == "updated"
            else f"{len(up.created) + len(up.unchanged)} units"
        )
        typer.echo(f"{up.space}: {'would be ' if dry_run else ''}{state_word} ({detail})")
        for name in up.missing:
            typer.echo(f"  {up.space}/{name}: file gone, unit left as is (--prune empties it)")
        for conflict in up.conflicts:
            typer.echo(f"  kept downstream edit at {conflict}")
        if up.revert_hint:
            typer.echo(f"  revert: {up.revert_hint}")
    prefix = "would be: " if dry_run else ""
    typer.echo(
        f"Bases: {prefix}{counts['created']} created, {counts['updated']} updated, "
        f"{counts['unchanged']} unchanged."
    )
    if dry_run:
        progress("(dry run; nothing changed)")


DEPLOY_SERVE_TIMEOUT_OPTION = typer.Option(
    0,
    "--serve-timeout",
    help="Then wait up to SECONDS until the plane serves (status --plane), through the "
    "target's kubeconfig; 0: do not wait. Success means serving; a HyperPod endpoint's "
    "pending SageMaker registration is reported, not waited for.",
)

DEPLOY_APPLY_OPTION = typer.Option(
    False,
    "--apply",
    help="Also apply the plane's objects to the target's cluster (its kept kubeconfig) by "
    "server-side apply, CRDs first: for a cluster whose Argo CD does not sync.",
)

DEPLOY_FORCE_CONFLICTS_OPTION = typer.Option(
    False,
    "--force-conflicts",
    help="With --apply: take over fields another field manager owns (default: refuse, "
    "exit 3, naming the field and its manager).",
)

DEPLOY_NO_CREDS_CHECK_OPTION = typer.Option(
    False,
    "--no-creds-check",
    help="mgmt plane: deploy even when the target cluster has no (or an expired) ACK "
    "credentials Secret.",
)


def deploy_cmd(
    ctx: typer.Context,
    plane: str = typer.Option(
        ..., "--plane", metavar=one_of(TARGET_PLANES), help="mgmt or workload."
    ),
    target: str = typer.Option(..., "--target", help="The OCI target, as <space>/<target>."),
    variant: str = VARIANT_OPTION,
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan; change nothing."),
    no_sync: bool = NO_SYNC_OPTION,
    sync_timeout: float = SYNC_TIMEOUT_OPTION,
    argocd_namespace: str = ARGOCD_NAMESPACE_OPTION,
    serve_timeout: float = DEPLOY_SERVE_TIMEOUT_OPTION,
    apply: bool = DEPLOY_APPLY_OPTION,
    force_conflicts: bool = DEPLOY_FORCE_CONFLICTS_OPTION,
    no_creds_check: bool = DEPLOY_NO_CREDS_CHECK_OPTION,
    hub_choice: str = HUB_OPTION,
    chart_mirror: Path | None = MIRROR_OPTION,  # the release gate's pinned CRDs
    json_out: bool = JSON_OPTION,
) -> None:
    """Create a plane's variants bound to a target, link them to the profile, resolve, publish;
    then ask the target's Argo CD to refresh what was published (unless --no-sync). The mgmt
    plane first needs the ACK controllers' credentials Secret on the target's cluster."""
    from ..flows import rollout

    run = stack_context(ctx, hub=hub_choice, json_out=json_out)
    opts = rollout.DeployOptions(
        plane,
        target,
        variant,
        dry_run,
        not no_sync,
        sync_timeout,
        argocd_namespace,
        serve_timeout,
        apply,
        force_conflicts,
        not no_creds_check,
    )
    done = rollout.deploy_plane(run, opts)
    report, sync, applied = done.report, done.sync, done.applied
    if sync is not None and sync["status"] == "timeout":
        progress(
            f"warning: not Synced within {int(sync_timeout)} s: {', '.join(sync['notSynced'])} "
            "(published; Argo CD will still pick the release up at its next poll)"
        )
    if json_out:
        emit_json(done.as_json())
    elif not dry_run:
        if applied is not None:
            typer.echo(
                f"Applied to {applied['server']}: {applied['created']} created, "
                f"{applied['configured']} configured, {applied['unchanged']} unchanged."
            )
        unchanged = not report.changed and not (applied and applied["changed"])
        typer.echo(
            f"Deployed plane {plane} ({variant}) to {target}: {len(report.created)} created, "
            f"{len(report.published)} published, {len(report.current)} already current."
            + (" Nothing changed." if unchanged else "")
        )
    if sync is not None and not json_out:
        _report_sync(sync)
    if done.served is not None:
        _report_serving(done.served, plane, serve_timeout, json_out)


def _report_sync(sync: dict[str, Any]) -> None:
    if sync["status"] == "skipped":
        typer.echo(f"sync: skipped ({sync['reason']})")
        return
    slowest = max(sync["seconds"].values(), default=0.0)
    typer.echo(
        f"sync: {len(sync['refreshed'])} Application(s) refreshed; "
        f"{len(sync['seconds'])} Synced at the new release (slowest {slowest} s)"
        + (f"; not yet: {', '.join(sync['notSynced'])}" if sync["notSynced"] else "")
        + (f"; no Application yet: {', '.join(sync['absent'])}" if sync["absent"] else "")
    )


def _report_serving(served: Served, plane: str, timeout: float, json_out: bool) -> None:
    """Deploy succeeds when the plane serves; registration still pending is said, not failed."""
    if served.status == "skipped":
        progress(f"serving: not checked ({served.reason})")
        return
    if not json_out:
        for line in served.lines():
            typer.echo(line)
    for name in served.registration_pending:
        progress(f"serving: {name} serves; its SageMaker endpoint registration is still pending")
    if served.status != "serving":
        raise EksinfError(
            f"{plane} plane published but not serving within {int(timeout)} s",
            hint="eksinf status --plane ... --watch 30 shows it converge; see docs/status.md.",
            exit_code=1,
        )


def link_profile_cmd(
    ctx: typer.Context,
    list_only: bool = typer.Option(
        False, "--list", help="Print the binding table and existing links."
    ),
    unlink: bool = typer.Option(
        False, "--unlink", help="Remove every profile link of the variant."
    ),
    variant: str = VARIANT_OPTION,
    hub_choice: str = HUB_OPTION,
    json_out: bool = JSON_OPTION,
) -> None:
    """Link each bound unit to the profile variant (one link per unit pair) and resolve it."""
    from ..flows import rollout

    if list_only and unlink:
        raise EksinfError("--list and --unlink exclude each other", exit_code=USAGE)
    run = stack_context(ctx, hub=hub_choice, json_out=json_out)
    if list_only:
        _print_link_table(rollout.link_table(run, variant), json_out)
        return
    if unlink:
        removed = rollout.unlink_profile(run, variant)
        if json_out:
            emit_json({"removed": removed})
        elif not removed:
            typer.echo("no links to remove")
        return
    results = rollout.link_profile(run, variant)
    if json_out:
        emit_json({"links": [r.to_json() for r in results]})
        return
    paths = sum(r.paths + r.setters for r in results)
    typer.echo(
        f"Linked {len(results)} unit(s) carrying {paths} binding(s) from "
        f"{profile_space(variant)} and resolved them."
    )


def _print_link_table(table: LinkTable, json_out: bool) -> None:
    if json_out:
        emit_json({"bindings": binding_rows(table.bindings), "links": table.links})
        return
    print_binding_table(table.bindings)
    typer.echo("")
    for lk in table.links:
        typer.echo(
            f"link {lk['Space']}/{lk['Slug']}: {lk['FromUnit']} -> {lk['ToSpace']}/{lk['ToUnit']}"
        )
    if not table.links:
        typer.echo("links: none")


# ---- release ----------------------------------------------------------------------------


def _units(count: int | None) -> str:
    return "unit count not reported" if count is None else f"{count} units"


@release_app.command("publish")
def release_publish(
    ctx: typer.Context,
    space: str = typer.Argument(...),
    no_sync: bool = NO_SYNC_OPTION,
    sync_timeout: float = SYNC_TIMEOUT_OPTION,
    argocd_namespace: str = ARGOCD_NAMESPACE_OPTION,
    hub_choice: str = HUB_OPTION,
    chart_mirror: Path | None = MIRROR_OPTION,  # the release gate's pinned CRDs
    json_out: bool = JSON_OPTION,
) -> None:
    """Publish the space's units bound to its release target as an OCI artifact, then ask the
    target's Argo CD to refresh it (unless --no-sync).

    Refused (exit 3) when the API server would not admit a unit: the same checks as
    `eksinf validate`, on the units as published, against the stack's CRDs.
    """
    from ..flows import rollout

    run = stack_context(ctx, hub=hub_choice, json_out=json_out)
    done = rollout.publish_space(run, space, not no_sync, argocd_namespace, sync_timeout)
    outcome, release, sync = done.outcome, done.release, done.sync
    if json_out:
        emit_json(done.as_json())
        return
    if outcome == "current":
        typer.echo(f"{space}: no changes since the latest release; nothing published")
    else:
        typer.echo(
            f"{space}: published release {release.release_num} to {release.ref} "
            f"({_units(release.unit_count)}, {release.manifest_digest})"
        )
    if sync is not None and sync["status"] == "skipped":
        typer.echo(f"sync: skipped ({sync['reason']})")
    elif sync is not None and space in sync["absent"]:
        typer.echo(
            f"sync: no Application {space} in {argocd_namespace} to refresh (Argo CD creates it "
            "from the target's root Application, then pulls this release); nothing waited for"
        )
    elif sync is not None:
        took = sync["seconds"].get(space)
        typer.echo(
            f"sync: {space} Synced at the new release after {took} s"
            if took is not None
            else f"sync: {space} not Synced within {int(sync_timeout)} s (Argo CD's next poll "
            "will still pick it up)"
        )


@release_app.command("list")
def release_list(
    ctx: typer.Context,
    space: str = typer.Argument(...),
    hub_choice: str = HUB_OPTION,
    json_out: bool = JSON_OPTION,
) -> None:
    """List a space's releases."""
    from ..flows import rollout

    releases = rollout.releases_of(stack_context(ctx, hub=hub_choice, json_out=json_out), space)
    if json_out:
        emit_json({"releases": [r.to_json() for r in releases]})
        return
    for r in releases:
        typer.echo(f"{r.release_num}\t{_units(r.unit_count)}\t{r.manifest_digest}\t{r.ref}")


# ---- sandbox ----------------------------------------------------------------------------

# Variant spaces are per component, not per target: a second sandbox (of another kind, say)
# needs its own variant, so it defaults to the sandbox's name ("sandbox" for the default one).
SANDBOX_VARIANT_OPTION = typer.Option(None, "--variant", help="Default: the sandbox's --name.")


@sandbox_app.command("up")
def sandbox_up(
    ctx: typer.Context,
    name: str = typer.Option("sandbox", "--name", help="Prefix of the stand-in target spaces."),
    variant: str = SANDBOX_VARIANT_OPTION,
    target_kind: str = typer.Option(
        DEFAULT_KIND,
        "--target-kind",
        metavar=one_of(KINDS),
        help="The kind the stand-in targets record, which picks each plane's components "
        "(hyperpod-eks: the model as an InferenceEndpointConfig, no Karpenter).",
    ),
    mirror: Path = MIRROR_OPTION,
    hub_choice: str = HUB_OPTION,
    json_out: bool = JSON_OPTION,
) -> None:
    """Render configs/ if missing, install bases, create the profile and both planes' variants on stand-in targets, link,
    resolve and publish (to an OCI layout under .eksinf/). Creates no infrastructure."""
    from ..flows import sandbox as sandbox_flow

    variant = variant or name
    run = stack_context(ctx, hub=hub_choice, json_out=json_out)
    report = sandbox_flow.up(run, name, variant, mirror, target_kind)
    if json_out:
        emit_json(report.to_json())
        return
    if report.changed:
        published = sum(len(p.published) for p in report.planes)
        typer.echo(f"sandbox {name} is up: {published} release(s) published.")
    else:
        typer.echo(f"sandbox {name} is up: nothing changed.")
    workload = [c for p in report.planes if p.plane == "workload" for c in p.created + p.existing]
    space = workload[-1] if workload else variant_space("karpenter", variant)
    typer.echo(
        f"next: {shell_command('eksinf', 'hub', 'units', '--space', space)}; "
        + shell_command("eksinf", "sandbox", "down", "--name", name, "--yes")
    )


@sandbox_app.command("down")
def sandbox_down(
    ctx: typer.Context,
    name: str = typer.Option("sandbox", "--name"),
    variant: str = SANDBOX_VARIANT_OPTION,
    keep_bases: bool = typer.Option(
        False,
        "--keep-bases",
        help="Keep the <component>-base spaces (a base another variant uses is always kept).",
    ),
    yes: bool = typer.Option(False, "--yes", help="Really delete."),
    hub_choice: str = HUB_OPTION,
    json_out: bool = JSON_OPTION,
) -> None:
    """Delete everything `sandbox up` created, in an order the hub accepts."""
    from ..flows import sandbox as sandbox_flow

    variant = variant or name
    run = stack_context(ctx, hub=hub_choice, json_out=json_out)
    plan = sandbox_flow.down_plan(run, name, variant, keep_bases)
    if not yes:
        if json_out:
            emit_json(plan.to_json())
            return
        for space in plan.delete:
            typer.echo(f"would delete {space}")
        for blocker in plan.blocked:
            typer.echo(f"blocked by {blocker}")
        if not plan.delete:
            typer.echo("nothing to delete")
        progress(
            "nothing can be deleted while anything blocks it"
            if plan.blocked
            else "re-run with --yes to delete"
        )
        return
    deleted = sandbox_flow.down(run, plan)
    if json_out:
        emit_json({"deleted": deleted})
    else:
        typer.echo(f"sandbox {name}: {len(deleted)} space(s) deleted.")
