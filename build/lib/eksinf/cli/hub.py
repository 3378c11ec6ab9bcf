"""Hub and deploy commands: install, deploy, link-profile, fn, release, sandbox, hub. Thin:
parse, call `deploy` or the `Hub`, format."""

from __future__ import annotations

import contextlib
import difflib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from .. import links as links_mod
from ..errors import USAGE, EksinfError, shell_command
from ..model.names import MANAGED_BY, profile_space, variant_space
from ..model.targets import DEFAULT_KIND
from .common import (
    HUB_OPTION,
    JSON_OPTION,
    MIRROR_OPTION,
    emit_json,
    print_table,
    progress,
    state,
)
from .links import binding_rows, print_binding_table

# The hub and the deploy flow pull in requests (OCI) and the hub backends: each command
# imports them when it runs, so other commands' start-up does not pay for them.
if TYPE_CHECKING:
    from eksinf.model.stack import Stack

    from ..hub.protocol import Hub

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

fn_app = typer.Typer(help="Run a hub function on units of a space.", no_args_is_help=True)
release_app = typer.Typer(help="Publish and list releases.", no_args_is_help=True)
sandbox_app = typer.Typer(
    help="The whole configuration on stand-in targets: no infrastructure.", no_args_is_help=True
)
hub_app = typer.Typer(help="See and manage what the hub holds.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.command("install")(install_cmd)
    app.command("deploy")(deploy_cmd)
    app.command("link-profile")(link_profile_cmd)
    app.add_typer(fn_app, name="fn")
    app.add_typer(release_app, name="release")
    app.add_typer(sandbox_app, name="sandbox")
    app.add_typer(hub_app, name="hub")


@contextmanager
def _hub(ctx: typer.Context, choice: str | None) -> Iterator[tuple[Hub, Stack]]:
    from ..hub import open_hub

    stack = state(ctx).stack()
    with open_hub(stack.root, choice) as hub:
        yield hub, stack


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
    from ..flows import deploy as flow

    if recreate and not yes and not dry_run:
        dry_run = True  # destructive: show the plan, change nothing
        progress("--recreate deletes and rebuilds the bases: showing the plan; re-run with --yes")
    with _hub(ctx, hub_choice) as (hub, stack):
        report = flow.install(
            hub, stack, source=source, dry_run=dry_run, prune=prune, recreate=recreate, say=progress
        )
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


def deploy_cmd(
    ctx: typer.Context,
    plane: str = typer.Option(..., "--plane", help="mgmt or workload."),
    target: str = typer.Option(..., "--target", help="The OCI target, as <space>/<target>."),
    variant: str = VARIANT_OPTION,
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan; change nothing."),
    no_sync: bool = NO_SYNC_OPTION,
    sync_timeout: float = SYNC_TIMEOUT_OPTION,
    argocd_namespace: str = ARGOCD_NAMESPACE_OPTION,
    serve_timeout: float = typer.Option(
        0,
        "--serve-timeout",
        help="Then wait up to SECONDS until the plane serves (status --plane), through the "
        "target's kubeconfig; 0: do not wait. Success means serving; a HyperPod endpoint's "
        "pending SageMaker registration is reported, not waited for.",
    ),
    apply: bool = typer.Option(
        False,
        "--apply",
        help="Also apply the plane's objects to the target's cluster (its kept kubeconfig) by "
        "server-side apply, CRDs first: for a cluster whose Argo CD does not sync.",
    ),
    force_conflicts: bool = typer.Option(
        False,
        "--force-conflicts",
        help="With --apply: take over fields another field manager owns (default: refuse, "
        "exit 3, naming the field and its manager).",
    ),
    no_creds_check: bool = typer.Option(
        False,
        "--no-creds-check",
        help="mgmt plane: deploy even when the target cluster has no (or an expired) ACK "
        "credentials Secret.",
    ),
    hub_choice: str = HUB_OPTION,
    chart_mirror: Path | None = MIRROR_OPTION,  # the release gate's pinned CRDs
    json_out: bool = JSON_OPTION,
) -> None:
    """Create a plane's variants bound to a target, link them to the profile, resolve, publish;
    then ask the target's Argo CD to refresh what was published (unless --no-sync). The mgmt
    plane first needs the ACK controllers' credentials Secret on the target's cluster."""
    from ..flows import deploy as flow
    from ..flows import targets as target_flow

    sync = served = applied = None
    with _hub(ctx, hub_choice) as (hub, stack):
        if apply:
            target_flow.target_kubeconfig(stack.root, target)  # refused before any change
        if plane == "mgmt" and not no_creds_check:
            _check_controller_creds(stack, target)
        report = flow.deploy(
            hub, stack, plane=plane, target=target, variant=variant, dry_run=dry_run, say=progress
        )
        if apply and dry_run:
            progress("--apply: nothing applied (dry run)")
        elif apply:
            spaces = [*report.existing, *report.created]
            applied = target_flow.apply_plane(
                hub, stack.root, target, sorted(spaces), force=force_conflicts, say=progress
            )
        if not dry_run and not no_sync:
            sync = target_flow.sync_after_publish(
                hub, stack.root, target, report.published, argocd_namespace, sync_timeout,
                say=progress,
            )  # fmt: skip
    if serve_timeout > 0 and not dry_run:
        from eksinf.model.profile import load_profile

        from ..flows import targets

        served = targets.wait_serving(
            stack, target, plane, report.kind, variant, str(load_profile(stack).spec["modelId"]),
            argocd_namespace, serve_timeout, say=progress,
        )  # fmt: skip
    if sync is not None and sync["status"] == "timeout":
        progress(
            f"warning: not Synced within {int(sync_timeout)} s: {', '.join(sync['notSynced'])} "
            "(published; Argo CD will still pick the release up at its next poll)"
        )
    if json_out:
        body = {**report.to_json(), "sync": sync, "applied": applied}
        if served is not None:
            body["serving"] = {k: v for k, v in served.items() if k != "lines"}
        emit_json(body)
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
    if sync is not None and not json_out and sync["status"] == "skipped":
        typer.echo(f"sync: skipped ({sync['reason']})")
    elif sync is not None and not json_out:
        slowest = max(sync["seconds"].values(), default=0.0)
        typer.echo(
            f"sync: {len(sync['refreshed'])} Application(s) refreshed; "
            f"{len(sync['seconds'])} Synced at the new release (slowest {slowest} s)"
            + (f"; not yet: {', '.join(sync['notSynced'])}" if sync["notSynced"] else "")
            + (f"; no Application yet: {', '.join(sync['absent'])}" if sync["absent"] else "")
        )
    if served is not None:
        _report_serving(served, plane, serve_timeout, json_out)


def _check_controller_creds(stack: Stack, target: str) -> None:
    """The target's cluster: the kubeconfig eksinf keeps for its space, else the one `cub
    cluster up` wrote under that name (the original's convention: a cub cluster X has target
    X/target)."""
    from ..aws.creds import ack_namespace, require_secret
    from ..model.names import cub_cluster_kubeconfig, kubeconfig_path

    space = target.partition("/")[0]
    kubeconfigs = [kubeconfig_path(stack.root, space)]
    with contextlib.suppress(EksinfError):  # not a name cub could have given a cluster
        kubeconfigs.append(cub_cluster_kubeconfig(space))
    require_secret(space, kubeconfigs, ack_namespace(stack.versions), say=progress)


def _report_serving(served: dict, plane: str, timeout: float, json_out: bool) -> None:
    """Deploy succeeds when the plane serves; registration still pending is said, not failed."""
    if served["status"] == "skipped":
        progress(f"serving: not checked ({served['reason']})")
        return
    if not json_out:
        for line in served["lines"]:
            typer.echo(line)
    for name in served["registrationPending"]:
        progress(f"serving: {name} serves; its SageMaker endpoint registration is still pending")
    if served["status"] != "serving":
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
    from ..flows import deploy as flow

    if list_only and unlink:
        raise EksinfError("--list and --unlink exclude each other", exit_code=USAGE)
    with _hub(ctx, hub_choice) as (hub, stack):
        if list_only:
            bindings = links_mod.load_bindings(stack)
            existing = [lk.to_json() for lk in flow.profile_links(hub, stack, variant)]
            if json_out:
                emit_json({"bindings": binding_rows(bindings), "links": existing})
                return
            print_binding_table(bindings)
            typer.echo("")
            for lk in existing:
                typer.echo(
                    f"link {lk['Space']}/{lk['Slug']}: {lk['FromUnit']} -> {lk['ToSpace']}/{lk['ToUnit']}"
                )
            if not existing:
                typer.echo("links: none")
            return
        if unlink:
            removed = flow.unlink_profile(hub, stack, variant, say=progress)
            if json_out:
                emit_json({"removed": removed})
            elif not removed:
                typer.echo("no links to remove")
            return
        results = flow.link_profile(hub, stack, variant, say=progress)
    if json_out:
        emit_json({"links": [r.to_json() for r in results]})
        return
    paths = sum(r.paths + r.setters for r in results)
    typer.echo(
        f"Linked {len(results)} unit(s) carrying {paths} binding(s) from "
        f"{profile_space(variant)} and resolved them."
    )


# ---- fn ---------------------------------------------------------------------------------

SPACE_OPTION = typer.Option(..., "--space", help="The space whose units to change.")
UNIT_OPTION = typer.Option(None, "--unit", help="One unit (slug).")
WHERE_OPTION = typer.Option(
    None, "--where", help="Select units: Slug = 'x', Kind = 'Deployment', Labels.k = 'v', AND..."
)


def _fn(ctx, hub_choice, function, args, space, unit, where, json_out) -> None:
    if unit and where:
        raise EksinfError("--unit and --where exclude each other", exit_code=USAGE)
    with _hub(ctx, hub_choice) as (hub, _stack):
        result = hub.invoke(space, function, args, unit=unit, where=where)
    if json_out:
        emit_json(result.to_json())
        return
    for slug in result.changed:
        typer.echo(f"{space}/{slug}: changed")
    if not result.changed:
        typer.echo(f"{function}: not changed ({len(result.unchanged)} unit(s) looked at)")


@fn_app.command("set-replicas")
def fn_set_replicas(
    ctx: typer.Context,
    replicas: int = typer.Argument(..., min=0),
    space: str = SPACE_OPTION,
    unit: str = UNIT_OPTION,
    where: str = WHERE_OPTION,
    hub_choice: str = HUB_OPTION,
    json_out: bool = JSON_OPTION,
) -> None:
    """Set spec.replicas of Deployments, ReplicaSets and StatefulSets."""
    _fn(ctx, hub_choice, "set-replicas", [str(replicas)], space, unit, where, json_out)


@fn_app.command("set-env")
def fn_set_env(
    ctx: typer.Context,
    container: str = typer.Argument(...),
    pairs: list[str] = typer.Argument(..., help="KEY=VALUE (empty value removes)."),
    space: str = SPACE_OPTION,
    unit: str = UNIT_OPTION,
    where: str = WHERE_OPTION,
    hub_choice: str = HUB_OPTION,
    json_out: bool = JSON_OPTION,
) -> None:
    """Upsert env vars in the named container."""
    _fn(ctx, hub_choice, "set-env", [container, *pairs], space, unit, where, json_out)


@fn_app.command("set-env-var")
def fn_set_env_var(
    ctx: typer.Context,
    container: str = typer.Argument(...),
    name: str = typer.Argument(...),
    value: str = typer.Argument(...),
    space: str = SPACE_OPTION,
    unit: str = UNIT_OPTION,
    where: str = WHERE_OPTION,
    hub_choice: str = HUB_OPTION,
    json_out: bool = JSON_OPTION,
) -> None:
    """Change an existing env var (never adds one: use set-env for that)."""
    _fn(ctx, hub_choice, "set-env-var", [container, name, value], space, unit, where, json_out)


@fn_app.command("set-annotation")
def fn_set_annotation(
    ctx: typer.Context,
    key: str = typer.Argument(...),
    value: str = typer.Argument(...),
    space: str = SPACE_OPTION,
    unit: str = UNIT_OPTION,
    where: str = WHERE_OPTION,
    hub_choice: str = HUB_OPTION,
    json_out: bool = JSON_OPTION,
) -> None:
    """Set an annotation on every resource."""
    _fn(ctx, hub_choice, "set-annotation", [key, value], space, unit, where, json_out)


@fn_app.command("set-bool-path")
def fn_set_bool_path(
    ctx: typer.Context,
    resource_type: str = typer.Argument(..., help="apiVersion/Kind, e.g. apps/v1/Deployment."),
    path: str = typer.Argument(...),
    value: str = typer.Argument(..., help="true or false"),
    space: str = SPACE_OPTION,
    unit: str = UNIT_OPTION,
    where: str = WHERE_OPTION,
    hub_choice: str = HUB_OPTION,
    json_out: bool = JSON_OPTION,
) -> None:
    """Set a boolean at a path of every resource of a type (creating the path)."""
    _fn(
        ctx, hub_choice, "set-bool-path", [resource_type, path, value], space, unit, where, json_out
    )


@fn_app.command("set-string-path")
def fn_set_string_path(
    ctx: typer.Context,
    resource_type: str = typer.Argument(
        ..., help="apiVersion/Kind, e.g. karpenter.sh/v1/NodePool."
    ),
    path: str = typer.Argument(..., help="Dot path; `~1` for a literal dot in a key."),
    value: str = typer.Argument(...),
    space: str = SPACE_OPTION,
    unit: str = UNIT_OPTION,
    where: str = WHERE_OPTION,
    hub_choice: str = HUB_OPTION,
    json_out: bool = JSON_OPTION,
) -> None:
    """Set a string at a path of every resource of a type (creating the path)."""
    _fn(
        ctx,
        hub_choice,
        "set-string-path",
        [resource_type, path, value],
        space,
        unit,
        where,
        json_out,
    )


@fn_app.command("set-image")
def fn_set_image(
    ctx: typer.Context,
    container: str = typer.Argument(...),
    image: str = typer.Argument(...),
    space: str = SPACE_OPTION,
    unit: str = UNIT_OPTION,
    where: str = WHERE_OPTION,
    hub_choice: str = HUB_OPTION,
    json_out: bool = JSON_OPTION,
) -> None:
    """Set the image of the named container ('*' = every container)."""
    _fn(ctx, hub_choice, "set-image", [container, image], space, unit, where, json_out)


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
    from ..flows import deploy as flow

    sync = None
    with _hub(ctx, hub_choice) as (hub, stack):
        flow.admit(hub, stack, space)  # exit 3 before anything is pushed
        outcome, release = flow.publish(hub, space)
        target = hub.get_space(space).release_target
        if outcome == "published" and target and not no_sync:
            from ..flows import targets

            sync = targets.sync_after_publish(
                hub, stack.root, target, [space], argocd_namespace, sync_timeout, say=progress
            )
    if json_out:
        emit_json(
            {"outcome": outcome, "release": release.to_json() if release else None, "sync": sync}
        )
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
    with _hub(ctx, hub_choice) as (hub, _stack):
        releases = hub.list_releases(space)
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
    with _hub(ctx, hub_choice) as (hub, stack):
        report = sandbox_flow.sandbox_up(
            hub,
            stack,
            name=name,
            variant=variant,
            mirror=mirror,
            kind=target_kind,
            say=progress,
        )
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
    with _hub(ctx, hub_choice) as (hub, stack):
        plan = sandbox_flow.sandbox_down_plan(
            hub, stack, name=name, variant=variant, keep_bases=keep_bases
        )
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
        deleted = sandbox_flow.sandbox_down(hub, plan, say=progress)
    if json_out:
        emit_json({"deleted": deleted})
    else:
        typer.echo(f"sandbox {name}: {len(deleted)} space(s) deleted.")


# ---- hub --------------------------------------------------------------------------------


@hub_app.command("spaces")
def hub_spaces(
    ctx: typer.Context,
    where: str = typer.Option(None, "--where", help="e.g. Labels.Component = 'karpenter'"),
    hub_choice: str = HUB_OPTION,
    json_out: bool = JSON_OPTION,
) -> None:
    """List spaces."""
    with _hub(ctx, hub_choice) as (hub, _stack):
        spaces = hub.list_spaces(where)
    if json_out:
        emit_json({"spaces": [s.to_json() for s in spaces]})
        return
    rows = [
        {
            "space": s.slug,
            "release target": s.release_target or "-",
            "labels": ",".join(f"{k}={v}" for k, v in sorted(s.labels.items())),
        }
        for s in spaces
    ]
    print_table(rows, ("space", "release target", "labels"))


@hub_app.command("units")
def hub_units(
    ctx: typer.Context,
    space: str = typer.Option(None, "--space"),
    where: str = typer.Option(None, "--where", help="e.g. Kind = 'Deployment'"),
    hub_choice: str = HUB_OPTION,
    json_out: bool = JSON_OPTION,
) -> None:
    """List units (all spaces unless --space), with head revision, target and gates."""
    with _hub(ctx, hub_choice) as (hub, _stack):
        units = hub.list_units(space, where)
    if json_out:
        emit_json({"units": [u.to_json() for u in units]})
        return
    rows = [
        {
            "unit": f"{u.space}/{u.slug}",
            "rev": str(u.head_revision),
            "target": u.target or "-",
            "placeholders": str(len(u.placeholders)),
            "gates": ",".join(u.validation_errors) or "-",
        }
        for u in units
    ]
    print_table(rows, ("unit", "rev", "target", "placeholders", "gates"))


@hub_app.command("show")
def hub_show(
    ctx: typer.Context,
    space: str = typer.Argument(...),
    unit: str = typer.Argument(...),
    revision: int = typer.Option(None, "--revision"),
    hub_choice: str = HUB_OPTION,
    json_out: bool = JSON_OPTION,
) -> None:
    """Print a unit's content (head, or --revision N)."""
    with _hub(ctx, hub_choice) as (hub, _stack):
        record = hub.get_unit(space, unit)
        data = hub.unit_data(space, unit, revision)
    if json_out:
        emit_json({**record.to_json(), "data": data})
        return
    typer.echo(data, nl=False)


@hub_app.command("diff")
def hub_diff(
    ctx: typer.Context,
    space: str = typer.Argument(...),
    unit: str = typer.Argument(...),
    from_rev: int = typer.Option(None, "--from", help="Old revision (default head-1)."),
    to_rev: int = typer.Option(None, "--to", help="New revision (default head)."),
    upstream: bool = typer.Option(
        False, "--upstream", help="Compare with the upstream unit's head."
    ),
    hub_choice: str = HUB_OPTION,
    json_out: bool = JSON_OPTION,
) -> None:
    """Unified diff of a unit's content between two revisions, or against its upstream.

    Both sides are compared as parsed YAML written in one style: a change shows as the fields it
    changed, not as the comments, quoting or indentation an edit re-wrote.
    """
    with _hub(ctx, hub_choice) as (hub, _stack):
        record = hub.get_unit(space, unit)
        new = hub.unit_data(space, unit, to_rev)
        if upstream:
            base_space = next(
                (
                    s.slug
                    for s in hub.list_spaces()
                    if s.space_id == hub.get_space(space).annotations.get("UpstreamSpaceID")
                ),
                None,
            )
            if base_space is None:
                raise EksinfError(f"{space} has no upstream space", exit_code=USAGE)
            old, old_name = hub.unit_data(base_space, unit), f"{base_space}/{unit}"
        else:
            old_rev = from_rev if from_rev is not None else max(1, record.head_revision - 1)
            old, old_name = hub.unit_data(space, unit, old_rev), f"{space}/{unit}@{old_rev}"
    from eksinf.core.yamlio import canonical_text

    # Content, not text: a base holds the committed file (comments, its quoting) and an edited
    # unit is written in eksinf's one style, so a text diff would show every line.
    lines = list(
        difflib.unified_diff(
            canonical_text(old, old_name).splitlines(keepends=True),
            canonical_text(new, f"{space}/{unit}").splitlines(keepends=True),
            old_name,
            f"{space}/{unit}",
        )
    )
    if json_out:
        emit_json({"from": old_name, "to": f"{space}/{unit}", "diff": "".join(lines)})
        return
    typer.echo("".join(lines), nl=False)


@hub_app.command("history")
def hub_history(
    ctx: typer.Context,
    space: str = typer.Argument(...),
    unit: str = typer.Argument(...),
    hub_choice: str = HUB_OPTION,
    json_out: bool = JSON_OPTION,
) -> None:
    """A unit's revisions, oldest first."""
    with _hub(ctx, hub_choice) as (hub, _stack):
        revisions = hub.history(space, unit)
    if json_out:
        emit_json({"revisions": [r.to_json() for r in revisions]})
        return
    for r in revisions:
        typer.echo(f"{r.num}\t{r.data_hash[:12]}\t{r.description}")


@hub_app.command("upload")
def hub_upload(
    ctx: typer.Context,
    component: str = typer.Argument(
        ..., help="Component name: the space is <component>-<variant>."
    ),
    source: str = typer.Argument(..., help="Unit directory, bundle .tar.gz, or OCI reference."),
    variant: str = typer.Option("base", "--variant"),
    prune: bool = typer.Option(False, "--prune", help="Empty units whose file is gone."),
    dry_run: bool = typer.Option(False, "--dry-run"),
    hub_choice: str = HUB_OPTION,
    json_out: bool = JSON_OPTION,
) -> None:
    """Upload one component per file (re-upload merges; unit IDs are kept)."""
    from ..flows import deploy as flow

    units = flow.read_source(source)  # refused (links, bombs) before the hub is opened
    with _hub(ctx, hub_choice) as (hub, _stack):
        report = hub.variant_upload(
            component,
            variant,
            units,
            labels=MANAGED_BY,
            prune=prune,
            dry_run=dry_run,
        )
    if json_out:
        emit_json({**report.to_json(), "dryRun": dry_run})
        return
    done = "created" if report.space_created else "uploaded"
    typer.echo(
        f"{report.space}: {f'would be {done} (dry run)' if dry_run else done}: "
        f"{len(report.created)} created, {len(report.updated)} updated, "
        f"{len(report.unchanged)} unchanged, {len(report.emptied)} emptied"
    )
    if report.revert_hint and not dry_run:
        typer.echo(f"  revert: {report.revert_hint}")
    if dry_run:
        progress("(dry run; nothing changed)")


@hub_app.command("restore")
def hub_restore(
    ctx: typer.Context,
    space: str = typer.Argument(...),
    unit: str = typer.Argument(...),
    revision: int = typer.Option(..., "--revision"),
    hub_choice: str = HUB_OPTION,
) -> None:
    """Write an old revision's content back as a new revision."""
    with _hub(ctx, hub_choice) as (hub, _stack):
        record = hub.restore(space, unit, revision)
    typer.echo(f"{space}/{unit}: head is now revision {record.head_revision}")


@hub_app.command("create-variant")
def hub_create_variant(
    ctx: typer.Context,
    variant: str = typer.Argument(...),
    upstream: str = typer.Argument(..., help="Upstream space, e.g. platform-profile-base."),
    target: str = typer.Option(None, "--target", help="Bind to <space>/<target>."),
    hub_choice: str = HUB_OPTION,
) -> None:
    """Clone a space into a variant (units keep an upstream pointer)."""
    with _hub(ctx, hub_choice) as (hub, _stack):
        space = hub.variant_create(variant, upstream, target=target)
    typer.echo(f"created {space.slug}")


@hub_app.command("promote")
def hub_promote(
    ctx: typer.Context, space: str = typer.Argument(...), hub_choice: str = HUB_OPTION
) -> None:
    """Merge upstream changes into a variant; its own edits survive."""
    with _hub(ctx, hub_choice) as (hub, _stack):
        report = hub.variant_promote(space)
    parts = [
        f"{len(names)} unit(s) {what}" + (f" ({', '.join(names)})" if names else "")
        for what, names in (
            ("updated", report.updated),
            ("added", report.added),
            ("emptied", report.emptied),
        )
    ]
    typer.echo(f"{space}: " + ", ".join(parts))


@hub_app.command("delete")
def hub_delete(
    ctx: typer.Context,
    space: str = typer.Argument(...),
    recursive: bool = typer.Option(False, "--recursive", help="Delete the space's contents too."),
    yes: bool = typer.Option(False, "--yes"),
    hub_choice: str = HUB_OPTION,
) -> None:
    """Delete a space (refused while other spaces reference it)."""
    with _hub(ctx, hub_choice) as (hub, _stack):
        hub.get_space(space)
        if not yes:
            typer.echo(f"would delete {space}" + (" and its contents" if recursive else ""))
            progress("re-run with --yes to delete")
            return
        hub.delete_space(space, recursive=recursive)
    typer.echo(f"deleted {space}")
