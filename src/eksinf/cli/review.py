"""Review commands: diff."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from ..errors import FAILURE, USAGE, EksinfError
from .common import MIRROR_OPTION, emit_json, stack_context

FORMATS = ("text", "markdown", "json")
PRICE_SOURCES = ("auto", "live", "snapshot")


def register(app: typer.Typer) -> None:
    app.command("diff")(diff_cmd)


def _fail_on(value: str | None) -> list[str]:
    from ..flows.review import CLASSES

    names = [v.strip() for v in (value or "").split(",") if v.strip()]
    unknown = [n for n in names if n not in CLASSES]
    if unknown:
        raise EksinfError(
            f"--fail-on: unknown risk class {', '.join(unknown)}",
            hint=f"Known classes: {', '.join(CLASSES)}.",
            exit_code=USAGE,
        )
    return names


DIFF_FAIL_ON_OPTION = typer.Option(
    None,
    "--fail-on",
    metavar="CLASS[,CLASS]",
    help="Exit 1 when any of these risk classes appears.",
)

DIFF_DETAILS_URL_OPTION = typer.Option(
    None,
    "--details-url",
    metavar="URL",
    help="Where the full JSON report is (Markdown truncation pointer).",
)

DIFF_LIST_CLASSES_OPTION = typer.Option(
    False, "--list-classes", help="Print the risk classes and exit."
)

DIFF_COLOR_OPTION = typer.Option(
    None,
    "--color/--no-color",
    help="ANSI colour in the text format. Default: on a terminal, unless NO_COLOR is set.",
)

DIFF_REGION_OPTION = typer.Option(
    None,
    "--region",
    metavar="REGION",
    help="Price NodePools in REGION (default: the profile's).",
)

DIFF_PRICES_OPTION = typer.Option(
    "auto",
    "--prices",
    metavar="SOURCE",
    help="auto (the Price List API when AWS credentials are configured, else the snapshot), "
    "live or snapshot.",
)

DIFF_AWS_PROFILE_OPTION = typer.Option(
    None, "--aws-profile", metavar="NAME", help="AWS profile for live prices."
)


def diff_cmd(
    ctx: typer.Context,
    base: str = typer.Argument(
        None,
        metavar="BASE",
        help="Git ref to compare with. Default: the merge base of HEAD with the default branch.",
    ),
    fmt: str = typer.Option("text", "--format", metavar="FORMAT", help="text, markdown or json."),
    json_out: bool = typer.Option(False, "--json", help="Same as --format json."),
    fail_on: str = DIFF_FAIL_ON_OPTION,
    details_url: str = DIFF_DETAILS_URL_OPTION,
    list_classes: bool = DIFF_LIST_CLASSES_OPTION,
    color: bool = DIFF_COLOR_OPTION,
    region: str = DIFF_REGION_OPTION,
    prices: str = DIFF_PRICES_OPTION,
    aws_profile: str = DIFF_AWS_PROFILE_OPTION,
    mirror: Path = MIRROR_OPTION,
) -> None:
    """Review the rendered stack against BASE: resources added, removed and changed, by field.

    Compares configs/ (and render/ bindings, versions.env, iam/, chart versions) at BASE with the
    working tree. A side whose configs/ is stale is rendered first (BASE in a temporary git
    worktree under .eksinf/diff/, removed afterwards). Each change is checked against the risk
    classes (--list-classes) and listed most severe first; GPU totals and the NodePools'
    maximum hourly and monthly cost show before and after (live Price List rates when AWS
    credentials are configured, else the shipped snapshot). Exit 0 (also for "no changes"),
    1 when a --fail-on class appears.
    """
    from ..flows import review as report

    fmt = "json" if json_out else fmt
    if fmt not in FORMATS:
        raise EksinfError(
            f"--format {fmt!r}: unknown format", hint="Use text, markdown or json.", exit_code=USAGE
        )
    if prices not in PRICE_SOURCES:
        raise EksinfError(
            f"--prices {prices!r}: unknown price source",
            hint="Use auto, live or snapshot.",
            exit_code=USAGE,
        )
    if list_classes:
        _list_classes(report.CLASSES, fmt == "json")
        return
    gate = _fail_on(fail_on)
    try:
        run = stack_context(ctx, json_out=fmt == "json", aws_profile=aws_profile)
        opts = report.ReviewOptions(base, mirror, fmt == "json", region, prices)
        rev = report.review(run, opts)
    except EksinfError as exc:
        if fmt == "json":
            emit_json(
                {"changed": None, "error": exc.message, "hint": exc.hint, "exit": exc.exit_code}
            )
        raise
    if fmt == "json":
        emit_json(report.to_json(rev))
    elif fmt == "markdown":
        typer.echo(report.to_markdown(rev, details_url), nl=False)
    else:
        paint = _colour(color)
        # click strips ANSI codes off a non-terminal unless told: --color means colour anyway
        typer.echo(report.to_text(rev, color=paint), nl=False, color=paint)
    hit = [c for c in gate if c in rev.risk_counts()]
    if hit:
        raise EksinfError(
            f"risk class(es) present: {', '.join(hit)} (--fail-on)",
            hint="A reviewer who owns these risks approves the change.",
            exit_code=FAILURE,
        )


def _list_classes(classes: dict[str, Any], json_out: bool) -> None:
    if json_out:
        emit_json(
            {
                "classes": [
                    {"id": c.id, "title": c.title, "marker": c.marker, "severity": i}
                    for i, c in enumerate(classes.values())
                ]
            }
        )
        return
    for c in classes.values():
        typer.echo(f"{c.marker} {c.id:<22} {c.title}")


def _colour(flag: bool | None) -> bool:
    """--color/--no-color win; else colour only on a terminal and without NO_COLOR
    (no-color.org: any non-empty value)."""
    import os
    import sys

    if flag is not None:
        return flag
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")
