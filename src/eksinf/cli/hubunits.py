"""The hub's own commands: `fn` (run a function on units of a space) and `hub` (see and manage
what the hub holds). Each calls one flow of flows/hubview.py with the command's StackContext;
cli/hub.py registers them."""

from __future__ import annotations

import typer

from ..errors import USAGE, EksinfError
from .common import (
    HUB_OPTION,
    JSON_OPTION,
    emit_json,
    print_table,
    progress,
    stack_context,
)

fn_app = typer.Typer(help="Run a hub function on units of a space.", no_args_is_help=True)
hub_app = typer.Typer(help="See and manage what the hub holds.", no_args_is_help=True)


# ---- fn ---------------------------------------------------------------------------------

SPACE_OPTION = typer.Option(..., "--space", help="The space whose units to change.")
UNIT_OPTION = typer.Option(None, "--unit", help="One unit (slug).")
WHERE_OPTION = typer.Option(
    None, "--where", help="Select units: Slug = 'x', Kind = 'Deployment', Labels.k = 'v', AND..."
)


def _fn(
    ctx: typer.Context,
    hub_choice: str | None,
    function: str,
    args: list[str],
    space: str,
    unit: str | None,
    where: str | None,
    json_out: bool,
) -> None:
    if unit and where:  # before the stack is read
        raise EksinfError("--unit and --where exclude each other", exit_code=USAGE)
    from ..flows import hubview

    run = stack_context(ctx, hub=hub_choice, json_out=json_out)
    result = hubview.invoke(run, space, function, args, unit, where)
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


# ---- hub --------------------------------------------------------------------------------


@hub_app.command("spaces")
def hub_spaces(
    ctx: typer.Context,
    where: str = typer.Option(None, "--where", help="e.g. Labels.Component = 'karpenter'"),
    hub_choice: str = HUB_OPTION,
    json_out: bool = JSON_OPTION,
) -> None:
    """List spaces."""
    from ..flows import hubview

    spaces = hubview.spaces(stack_context(ctx, hub=hub_choice, json_out=json_out), where)
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
    from ..flows import hubview

    units = hubview.units(stack_context(ctx, hub=hub_choice, json_out=json_out), space, where)
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
    from ..flows import hubview

    run = stack_context(ctx, hub=hub_choice, json_out=json_out)
    record, data = hubview.show(run, space, unit, revision)
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
    from ..flows.hubview import unit_diff

    diff = unit_diff(stack_context(ctx, hub=hub_choice), space, unit, from_rev, to_rev, upstream)
    if json_out:
        emit_json(diff.as_json())
        return
    typer.echo("".join(diff.lines), nl=False)


@hub_app.command("history")
def hub_history(
    ctx: typer.Context,
    space: str = typer.Argument(...),
    unit: str = typer.Argument(...),
    hub_choice: str = HUB_OPTION,
    json_out: bool = JSON_OPTION,
) -> None:
    """A unit's revisions, oldest first."""
    from ..flows import hubview

    revisions = hubview.history(stack_context(ctx, hub=hub_choice, json_out=json_out), space, unit)
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
    from ..flows import hubview

    units = hubview.read_source(source)  # refused (links, bombs) before the hub is opened
    run = stack_context(ctx, hub=hub_choice, json_out=json_out)
    report = hubview.upload(run, component, variant, units, prune, dry_run)
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
    from ..flows import hubview

    record = hubview.restore(stack_context(ctx, hub=hub_choice), space, unit, revision)
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
    from ..flows import hubview

    space = hubview.create_variant(stack_context(ctx, hub=hub_choice), variant, upstream, target)
    typer.echo(f"created {space.slug}")


@hub_app.command("promote")
def hub_promote(
    ctx: typer.Context, space: str = typer.Argument(...), hub_choice: str = HUB_OPTION
) -> None:
    """Merge upstream changes into a variant; its own edits survive."""
    from ..flows import hubview

    report = hubview.promote(stack_context(ctx, hub=hub_choice), space)
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
    from ..flows import hubview

    if not hubview.delete_space(stack_context(ctx, hub=hub_choice), space, recursive, yes):
        typer.echo(f"would delete {space}" + (" and its contents" if recursive else ""))
        progress("re-run with --yes to delete")
        return
    typer.echo(f"deleted {space}")
