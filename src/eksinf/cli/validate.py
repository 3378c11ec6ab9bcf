"""`eksinf validate`: the API server's admission of every unit, offline (validate.admission)."""

from __future__ import annotations

import time
from pathlib import Path

import typer

from ..errors import CONTRACT, FAILURE, USAGE, EksinfError
from ..model.targets import TARGET_PLANES
from .common import JSON_OPTION, MIRROR_OPTION, emit_json, one_of, progress, stack_context


def register(app: typer.Typer) -> None:
    app.command("validate")(validate_cmd)


SERVER_OPTION = typer.Option(
    None,
    "--server",
    help="`local`: a real kube-apiserver on loopback creates every release; a kubeconfig path: "
    "a server-side dry run (dryRun=All) against that cluster.",
)
CONTEXT_OPTION = typer.Option(None, "--context", help="The kubeconfig context (with --server).")
PLANE_OPTION = typer.Option(
    None,
    "--plane",
    metavar=one_of(TARGET_PLANES),
    help="Only this plane's releases (mgmt or workload; with --server).",
)


def validate_cmd(
    ctx: typer.Context,
    json_out: bool = JSON_OPTION,
    server: str | None = SERVER_OPTION,
    context: str | None = CONTEXT_OPTION,
    plane: str | None = PLANE_OPTION,
    chart_mirror: Path | None = MIRROR_OPTION,  # the pinned cluster CRDs (charts.mirror_dir)
) -> None:
    """Check every unit as the API server would admit it (exit 3 on an invalid field).

    Raw units (configs/) and the units resolved with the profile, as the hub publishes them:
    built-in kinds against the pinned Kubernetes version's schemas (quantities and names
    included), custom resources against their CRD's schema and CEL rules, Argo CD Applications
    and the profile against the schemas shipped with eksinf. A placeholder at a bound path is
    `unresolved` in raw units; resolved units must pass fully.

    With --server the API server itself judges the resolved releases of both planes
    (docs/validate.md): `local` creates them on an ephemeral control plane per plane, a
    kubeconfig dry-runs them on that cluster.
    """
    if server is None:
        if context is not None or plane is not None:
            raise EksinfError("validate: --context and --plane go with --server", exit_code=USAGE)
        _offline(ctx, json_out)
    else:
        _server(ctx, json_out, server, context, plane)


def _server(
    ctx: typer.Context, json_out: bool, server: str, context: str | None, plane: str | None
) -> None:
    from ..flows.validate import server_engine

    engine = server_engine()

    started = time.perf_counter()
    try:
        planes = engine.planes_for(plane)
        stack = stack_context(ctx).stack
        if server == "local":
            if context is not None:
                raise EksinfError("validate: --context goes with a kubeconfig", exit_code=USAGE)
            report = engine.check_local(stack, planes, progress=progress)
        else:
            client, target = engine.connect(Path(server), context)
            report = engine.check_cluster(stack, client, target, planes)
    except EksinfError as exc:  # no server, an unreadable stack: still valid JSON
        if json_out:
            emit_json({"ok": False, "error": exc.message, "hint": exc.hint})
        raise
    if json_out:
        emit_json(report.as_dict())
    else:
        for finding in report.findings:
            typer.echo(finding.line())
    for p in report.planes:
        if p.created_namespaces:
            progress(
                f"validate --server: plane {p.plane}: created namespaces no unit holds: "
                + ", ".join(p.created_namespaces)
            )
    summary = (
        f"{sum(p.admitted for p in report.planes)} objects admitted by {report.target} "
        f"({report.profile}; planes {', '.join(p.plane for p in report.planes)}): "
        f"{report.count(engine.REFUSED)} refused, {report.count(engine.NOT_CHECKABLE)} not "
        "checkable here"
    )
    if not report.ok:
        raise EksinfError(
            f"validate --server: {summary}",
            hint="Each line names the plane, unit, resource, field and the API server's message.",
            exit_code=CONTRACT,
        )
    if report.count(engine.NOT_CHECKABLE):
        raise EksinfError(
            f"validate --server: {summary}",
            hint="A kind the cluster does not serve, or a namespace it lacks, is not checked "
            "there: not a pass. Check that plane against a cluster that has them, or `local`.",
            exit_code=FAILURE,
        )
    progress(f"validate --server: {summary} in {time.perf_counter() - started:.1f}s")


def _offline(ctx: typer.Context, json_out: bool) -> None:
    from ..flows.validate import validate_stack

    started = time.perf_counter()
    try:
        report = validate_stack(stack_context(ctx).stack)
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
