"""Build-side commands: version, components, charts, render, guard, verify."""

from __future__ import annotations

from pathlib import Path

import typer

from eksinf.flows.about import version_info
from eksinf.flows.build import chart_lock, guard, lock_pins

from ..model.stack import PLANES
from .common import (
    JSON_OPTION,
    MIRROR_OPTION,
    emit_json,
    one_of,
    print_table,
    stack_context,
    state,
)
from .listing import component_rows, keep, sources_key
from .quick import components_table, version_line
from .rendering import DIFF_LINES, guard_failure, render, render_of, report_guard, verify

charts_app = typer.Typer(
    help="Pin and inspect the Helm charts the stack renders.", no_args_is_help=True
)


def register(app: typer.Typer) -> None:
    app.command("version")(version_cmd)
    app.command("components")(components_cmd)
    app.command("render")(render_cmd)
    app.command("guard")(guard_cmd)
    app.command("verify")(verify_cmd)
    app.add_typer(charts_app, name="charts")


def version_cmd(json_out: bool = JSON_OPTION) -> None:
    """Print the version, git commit and Helm engine."""
    info = version_info()
    if json_out:
        emit_json(info)
    else:
        typer.echo(version_line(info))


def components_cmd(
    ctx: typer.Context,
    plane: str = typer.Option(
        None, "--plane", metavar=one_of(PLANES), help="Only this plane: hub, mgmt or workload."
    ),
    json_out: bool = JSON_OPTION,
) -> None:
    """List the stack's components in apply order."""
    before = sources_key(state(ctx).stack_dir)
    stack = stack_context(ctx).stack
    rows = component_rows(stack, plane)
    keep(stack, before)  # for cli/quick.py to answer the next run from
    if json_out:
        emit_json({"components": rows})
        return
    print_table(*components_table(rows))


COMPONENT_OPTION = typer.Option(
    None,
    "--component",
    "-c",
    metavar="<name>",
    help="Only this component (repeat for several). Default: all.",
)


def render_cmd(
    ctx: typer.Context,
    mirror: Path = MIRROR_OPTION,
    out: Path = typer.Option(
        None, "--out", metavar="<dir>", help="Write here instead of configs/ (for inspection)."
    ),
    skip_guard: bool = typer.Option(
        False, "--skip-guard", help="Write even if the guard finds hazards (use with --out)."
    ),
    json_out: bool = JSON_OPTION,
) -> None:
    """Render the stack into configs/, one file per unit.

    Every component lands in configs/<component>/; the whole tree is swapped in atomically.

    Charts are flattened with the pinned Helm engine at RENDER_KUBE_VERSION; CRDs are split from
    controllers and stamped with sync waves (-20 / -10). The guard runs before anything is
    written: on a hazard, configs/ is left exactly as it was.
    """
    render(lambda: stack_context(ctx).stack, mirror, out, skip_guard, json_out)


def guard_cmd(
    ctx: typer.Context,
    mirror: Path = MIRROR_OPTION,
    component: list[str] = COMPONENT_OPTION,
    json_out: bool = JSON_OPTION,
) -> None:
    """Find Helm features that do not survive flattening.

    Renders in memory (nothing is written) and reports each hazard with its component, file,
    resource and fix. Exit 3 when a hazard is not allowed in render/<component>/HAZARDS.allow.
    """
    result = render_of(stack_context(ctx).stack, mirror, quiet=True, components=component)
    report = guard.check(result)
    if json_out:
        emit_json(
            {
                "ok": report.ok,
                "findings": [f.as_dict() for f in report.findings],
                "unusedAllows": [a.__dict__ for a in report.unused_allows],
            }
        )
    else:
        report_guard(report)
    if not report.ok:
        raise guard_failure(report)
    if not json_out:
        typer.echo(f"guard: clean ({len(report.findings)} allowed finding(s))")


def verify_cmd(
    ctx: typer.Context,
    mirror: Path = MIRROR_OPTION,
    full: bool = typer.Option(
        False,
        "--full",
        help="Render everything afresh (no derived-data cache) and print the whole diff, not "
        f"the first {DIFF_LINES} lines.",
    ),
    component: list[str] = COMPONENT_OPTION,
    json_out: bool = JSON_OPTION,
) -> None:
    """Fail when configs/ differs from a fresh render.

    Exit 1 and a unified diff when configs/ drifted from its sources.

    The guard runs too: an unhandled hazard fails verify (exit 3) even when configs/ is in sync.
    """
    verify(lambda: stack_context(ctx).stack, mirror, full, component, json_out)


@charts_app.command("lock")
def charts_lock_cmd(ctx: typer.Context, mirror: Path = MIRROR_OPTION) -> None:
    """Pin every chart archive's and upstream manifest's sha256 in charts.lock.

    Fetches each chart and manifest (mirror first, then its source) and rewrites charts.lock;
    review the diff before committing it.
    """
    stack = stack_context(ctx).stack
    stack.refuse_writes("charts lock", "charts.lock")
    chart_pins, manifest_pins = lock_pins(stack, mirror)
    for entry in chart_pins:
        typer.echo(f"{entry.chart} {entry.version}  sha256:{entry.sha256}  ({entry.pinned_from})")
    for pinned in manifest_pins:
        typer.echo(
            f"{pinned.name} {pinned.version}  sha256:{pinned.sha256}  ({pinned.pinned_from})"
        )


@charts_app.command("list")
def charts_list_cmd(ctx: typer.Context, json_out: bool = JSON_OPTION) -> None:
    """List the charts the stack renders and their pinned digests."""
    stack = stack_context(ctx).stack
    lock = chart_lock(stack)
    rows = []
    for comp in stack.components:
        for spec in comp.charts:
            entry = lock.get((spec.chart, spec.version, spec.repo))
            rows.append(
                {
                    "component": comp.name,
                    "chart": spec.chart,
                    "version": spec.version,
                    "source": spec.source,
                    "sha256": entry.sha256 if entry else None,
                }
            )
    if json_out:
        emit_json({"charts": rows})
        return
    for r in rows:
        pin = r["sha256"] or "NOT PINNED"
        typer.echo(f"{r['component']:<16} {r['chart']:<22} {r['version']:<8} {pin}")
