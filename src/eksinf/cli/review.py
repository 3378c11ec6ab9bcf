"""Review commands: diff."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from ..errors import FAILURE, USAGE, EksinfError
from .common import MIRROR_OPTION, emit_json, one_of, stack_context

if TYPE_CHECKING:
    from ..flows.review import Review

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


def diff_cmd(
    ctx: typer.Context,
    base: str = typer.Argument(
        None,
        metavar="BASE",
        help="Git ref to compare with. Default: the merge base of HEAD with the default branch.",
    ),
    fmt: str = typer.Option(
        "text", "--format", metavar=one_of(FORMATS), help="text, markdown or json."
    ),
    json_out: bool = typer.Option(False, "--json", help="Same as --format json."),
    fail_on: str = typer.Option(
        None,
        "--fail-on",
        metavar="<class,...>",
        help="Exit 1 when any of these risk classes appears.",
    ),
    details_url: str = typer.Option(
        None,
        "--details-url",
        metavar="<url>",
        help="Where the full JSON report is (Markdown truncation pointer).",
    ),
    list_classes: bool = typer.Option(
        False, "--list-classes", help="Print the risk classes and exit."
    ),
    color: bool = typer.Option(
        None,
        "--color/--no-color",
        help="ANSI colour in the text format. Default: on a terminal, unless NO_COLOR is set.",
    ),
    region: str = typer.Option(
        None,
        "--region",
        metavar="<region>",
        help="Price NodePools in REGION (default: the profile's).",
    ),
    prices: str = typer.Option(
        "auto",
        "--prices",
        metavar=one_of(PRICE_SOURCES),
        help="auto (the Price List API when AWS credentials are configured, else the snapshot), "
        "live or snapshot.",
    ),
    aws_profile: str = typer.Option(
        None, "--aws-profile", metavar="<name>", help="AWS profile for live prices."
    ),
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
    fmt = "json" if json_out else fmt
    _check_options(fmt, prices)
    if list_classes:
        _list_classes(fmt)
        return
    gate = _fail_on(fail_on)
    rev = _review_or_json_error(ctx, base, mirror, fmt, region, prices, aws_profile)
    _print(rev, fmt, details_url, color)
    _check_gate(gate, rev)


def _review_or_json_error(
    ctx: typer.Context,
    base: str | None,
    mirror: Path | None,
    fmt: str,
    region: str | None,
    prices: str,
    aws_profile: str | None,
) -> Review:
    """The review; when it fails and JSON was asked for, the error as JSON on stdout too."""
    from ..flows import review

    try:
        run = stack_context(ctx, json_out=fmt == "json", aws_profile=aws_profile)
        return review.review(run, review.ReviewOptions(base, mirror, fmt == "json", region, prices))
    except EksinfError as exc:
        if fmt == "json":
            emit_json(
                {"changed": None, "error": exc.message, "hint": exc.hint, "exit": exc.exit_code}
            )
        raise


def _check_gate(gate: list[str], rev: Review) -> None:
    """--fail-on: exit 1 when one of its classes appears."""
    hit = [c for c in gate if c in rev.risk_counts()]
    if hit:
        raise EksinfError(
            f"risk class(es) present: {', '.join(hit)} (--fail-on)",
            hint="A reviewer who owns these risks approves the change.",
            exit_code=FAILURE,
        )


def _check_options(fmt: str, prices: str) -> None:
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


def _list_classes(fmt: str) -> None:
    """--list-classes: the risk classes, most severe first."""
    from ..flows.review import CLASSES

    if fmt == "json":
        emit_json(
            {
                "classes": [
                    {"id": c.name, "title": c.title, "marker": c.marker, "severity": i}
                    for i, c in enumerate(CLASSES.values())
                ]
            }
        )
    else:
        for c in CLASSES.values():
            typer.echo(f"{c.marker} {c.name:<22} {c.title}")


def _print(rev: Review, fmt: str, details_url: str | None, color: bool | None) -> None:
    from ..flows import review as report

    if fmt == "json":
        emit_json(report.to_json(rev))
    elif fmt == "markdown":
        typer.echo(report.to_markdown(rev, details_url), nl=False)
    else:
        paint = _colour(color)
        # click strips ANSI codes off a non-terminal unless told: --color means colour anyway
        typer.echo(report.to_text(rev, color=paint), nl=False, color=paint)


def _colour(flag: bool | None) -> bool:
    """--color/--no-color win; else colour only on a terminal and without NO_COLOR
    (no-color.org: any non-empty value)."""
    import os
    import sys

    if flag is not None:
        return flag
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")
