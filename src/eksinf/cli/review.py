"""Review commands: diff."""

from __future__ import annotations

from pathlib import Path

import typer

from ..errors import FAILURE, USAGE, EksinfError
from .common import MIRROR_OPTION, emit_json, progress, state

FORMATS = ("text", "markdown", "json")


def register(app: typer.Typer) -> None:
    app.command("diff")(diff_cmd)


def _fail_on(value: str | None) -> list[str]:
    from ..review.risks import CLASSES

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
    fmt: str = typer.Option("text", "--format", metavar="FORMAT", help="text, markdown or json."),
    json_out: bool = typer.Option(False, "--json", help="Same as --format json."),
    fail_on: str = typer.Option(
        None,
        "--fail-on",
        metavar="CLASS[,CLASS]",
        help="Exit 1 when any of these risk classes appears.",
    ),
    details_url: str = typer.Option(
        None,
        "--details-url",
        metavar="URL",
        help="Where the full JSON report is (Markdown truncation pointer).",
    ),
    list_classes: bool = typer.Option(
        False, "--list-classes", help="Print the risk classes and exit."
    ),
    mirror: Path = MIRROR_OPTION,
) -> None:
    """Review the rendered stack against BASE: resources added, removed and changed, by field.

    Compares configs/ (and render/ bindings, versions.env, iam/, chart versions) at BASE with the
    working tree. A side whose configs/ is stale is rendered first (BASE in a temporary git
    worktree under .eksinf/diff/, removed afterwards). Each change is checked against the risk
    classes (--list-classes); NodePool limit and instance-family changes show the maximum
    hourly and monthly cost before and after. Exit 0 (also for "no changes"), 1 when a
    --fail-on class appears.
    """
    from ..review import report

    fmt = "json" if json_out else fmt
    if fmt not in FORMATS:
        raise EksinfError(
            f"--format {fmt!r}: unknown format", hint="Use text, markdown or json.", exit_code=USAGE
        )
    if list_classes:
        from ..review.risks import CLASSES

        if fmt == "json":
            emit_json({"classes": [{"id": c.id, "title": c.title} for c in CLASSES.values()]})
        else:
            for c in CLASSES.values():
                typer.echo(f"{c.id:<22} {c.title}")
        return
    gate = _fail_on(fail_on)
    try:
        rev = _review(ctx, base, mirror, quiet=fmt == "json")
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
        typer.echo(report.to_text(rev), nl=False)
    hit = [c for c in gate if c in rev.risk_counts()]
    if hit:
        raise EksinfError(
            f"risk class(es) present: {', '.join(hit)} (--fail-on)",
            hint="A reviewer who owns these risks approves the change.",
            exit_code=FAILURE,
        )


def _review(ctx: typer.Context, base: str | None, mirror: Path | None, quiet: bool):
    from ..charts import mirror_dir
    from ..review import report, source
    from ..review.snapshot import snapshot, without_unchanged_units

    root = state(ctx).stack().root
    say = (lambda _m: None) if quiet else progress
    ref = base or source.default_base(root)
    sha = source.resolve(root, ref)
    before = source.at_commit(root, base or "merge-base", sha, mirror_dir(mirror), say)
    after = source.working_tree(root, mirror_dir(mirror), say)
    notes = tuple(
        f"{side.label}: committed configs/ was stale, so it was rendered from its inputs"
        for side in (before, after)
        if side.rendered
    )
    old, new = without_unchanged_units(before.files, after.files)
    return report.review(snapshot(old), snapshot(new), before.label, after.label, notes)
