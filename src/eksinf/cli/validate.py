"""`eksinf validate`: the API server's admission of every unit, offline (validate.admission)."""

from __future__ import annotations

import time

import typer

from ..errors import CONTRACT, FAILURE, EksinfError
from .common import JSON_OPTION, emit_json, progress, state


def register(app: typer.Typer) -> None:
    app.command("validate")(validate_cmd)


def validate_cmd(ctx: typer.Context, json_out: bool = JSON_OPTION) -> None:
    """Check every unit as the API server would admit it (exit 3 on an invalid field).

    Raw units (configs/) and the units resolved with the profile, as the hub publishes them:
    built-in kinds against the pinned Kubernetes version's schemas (quantities and names
    included), custom resources against their CRD's schema and CEL rules, Argo CD Applications
    and the profile against the schemas shipped with eksinf. A placeholder at a bound path is
    `unresolved` in raw units; resolved units must pass fully.
    """
    from ..validate.admission import validate_stack

    started = time.perf_counter()
    try:
        report = validate_stack(state(ctx).stack())
    except EksinfError as exc:  # an unreadable unit, profile or binding: still valid JSON
        if json_out:
            emit_json({"ok": False, "error": exc.message, "hint": exc.hint})
        raise
    total = report.total
    if json_out:
        emit_json(report.as_dict())
    else:
        for finding in total.findings:
            if finding.status != "unresolved":
                typer.echo(finding.line())
    invalid, missing = total.count("invalid"), total.count("not-evaluated")
    summary = (
        f"{total.resources} resources in {report.raw.units} units, raw and resolved "
        f"({report.profile}): {invalid} invalid, {total.count('unresolved')} unresolved "
        f"(raw, bound), {missing} not evaluated; {total.rules_evaluated} CEL rule evaluations "
        f"({report.distinct_rules} distinct rules), "
        f"{total.transition_rules} transition rules skipped (update only)"
    )
    if invalid:
        raise EksinfError(
            f"validate: {summary}",
            hint="Each line names the unit, resource, field path, rule and value the API server "
            "would refuse.",
            exit_code=CONTRACT,
        )
    if missing:
        raise EksinfError(
            f"validate: {summary}",
            hint="A rule the CEL engine cannot evaluate is not a pass: see docs/validate.md.",
            exit_code=FAILURE,
        )
    if not json_out:
        progress(f"validate: {summary} in {time.perf_counter() - started:.2f}s")
