"""Link commands: `links list`, `links resolve`, and `lint`. Parse, call, format."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from ..errors import CONTRACT, EksinfError
from ..flows import links as links_mod
from .common import JSON_OPTION, emit_json, print_table, progress, stack_context

links_app = typer.Typer(
    help="Profile links: which profile value lands in which unit, resource and field.",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    app.add_typer(links_app, name="links")
    app.command("lint")(lint_cmd)


def binding_rows(bindings: list[links_mod.Binding]) -> list[dict[str, Any]]:
    return [b.as_dict() for b in bindings]


def print_binding_table(bindings: list[links_mod.Binding]) -> None:
    """Plain aligned columns: the table is read in logs and diffs, so it never wraps."""
    header = ("COMPONENT", "UNIT", "SOURCE", "RESOURCE", "PATH OR SETTER")
    rows = [
        (b.component, b.unit, f"spec.{b.source}", f"{b.kind} {b.name}", b.target) for b in bindings
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]
    for row in [header, *rows]:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        typer.echo("  ".join([*cells, row[-1]]))


@links_app.command("list")
def links_list_cmd(ctx: typer.Context, json_out: bool = JSON_OPTION) -> None:
    """Print the binding table: profile field -> unit, resource, path or setter."""
    bindings = links_mod.load_bindings(stack_context(ctx).stack)
    if json_out:
        emit_json({"bindings": binding_rows(bindings)})
        return
    print_binding_table(bindings)
    paths = sum(1 for b in bindings if b.path is not None)
    progress(
        f"{len(bindings)} bindings ({paths} paths, {len(bindings) - paths} setters) in "
        f"{len({b.unit_key for b in bindings})} units"
    )


@links_app.command("resolve")
def links_resolve_cmd(
    ctx: typer.Context,
    profile: Path = typer.Option(
        ..., "--profile", help="PlatformProfile file whose values to write.", dir_okay=False
    ),
    out: Path = typer.Option(
        ..., "--out", help="Directory to write resolved units into (replaced atomically)."
    ),
    json_out: bool = JSON_OPTION,
) -> None:
    """Write the committed units with the profile's values resolved in, for inspection.

    Nothing under configs/ changes. Fails (exit 3) if a placeholder is left unresolved; the
    output is still written so you can look at it.
    """
    done = links_mod.resolve(stack_context(ctx).stack, profile, out)
    left = done.unresolved
    if json_out:
        emit_json(done.as_json())
    else:
        progress(f"resolved {done.bindings} bindings into {len(done.units)} units under {out}")
    if left:
        raise EksinfError(
            f"{len(left)} placeholder(s) left unresolved, first: {left[0]}",
            hint="Add a binding for each (render/<component>/links/bindings.yaml); "
            "`eksinf lint` lists them all.",
            exit_code=CONTRACT,
        )


def lint_cmd(
    ctx: typer.Context,
    list_only: bool = typer.Option(False, "--list", help="Print the table of checks and exit."),
    json_out: bool = JSON_OPTION,
) -> None:
    """Check links and cross-component invariants on the committed configs/ (exit 3 on a finding).

    Placeholders are resolved through the bindings with the stack's profile first, so linked
    values are compared as they will ship. Each finding names the places that disagree.
    """
    if list_only:
        rows = links_mod.lint_table()
        if json_out:
            emit_json({"checks": rows})
        else:
            print_table(rows, ("name", "domain", "severity", "anchor", "summary"))
        return
    report = links_mod.lint_stack(stack_context(ctx).stack)
    if json_out:
        emit_json(report.as_dict())
    else:
        for finding in report.findings:
            typer.echo(f"{finding.label}: {finding.detail}")
            for index, where in enumerate(finding.places):
                typer.echo(f"  {'here ' if index == 0 else 'there'}: {where}")
    if not report.ok:
        raise EksinfError(
            f"lint: {len(report.findings)} finding(s)",
            hint="Each finding names the places that disagree; see docs/linking.md.",
            exit_code=CONTRACT,
        )
    if not json_out:
        progress(
            f"lint: clean ({report.bindings} bindings, {report.placeholders} placeholders, "
            f"{len(report.checks)} checks)"
        )
