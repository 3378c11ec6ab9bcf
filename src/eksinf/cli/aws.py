"""AWS-facing commands: status, creds, enroll, teardown. Parse, call `eksinf.aws`, format."""

from __future__ import annotations

import typer

from ..aws import status as status_mod
from ..aws.scope import StackScope
from ..aws.session import AwsIdentity, AwsSession
from ..errors import ENVIRONMENT, EksinfError
from .common import JSON_OPTION, emit_json, err_console, progress, state

REGION_OPTION = typer.Option(
    None, "--region", help="AWS region. Default: the platform profile's region."
)
AWS_PROFILE_OPTION = typer.Option(
    None,
    "--aws-profile",
    help="AWS CLI profile for every AWS, kubectl and Helm call of this command. "
    "Default: $AWS_PROFILE as it was when the command started.",
)


def register(app: typer.Typer) -> None:
    app.command("status")(status_cmd)


def stack_scope(ctx: typer.Context, region: str | None) -> StackScope:
    from ..profile import STACK_TAG_KEY, load_profile

    profile = load_profile(state(ctx).stack())
    return StackScope.from_profile(profile, STACK_TAG_KEY, region)


def aws_session(scope: StackScope, aws_profile: str | None) -> AwsSession:
    return AwsSession(AwsIdentity.resolve(scope.region, aws_profile))


def warn(message: str) -> None:
    err_console.print(f"warning: {message}", markup=False, highlight=False)


def status_cmd(
    ctx: typer.Context,
    region: str = REGION_OPTION,
    aws_profile: str = AWS_PROFILE_OPTION,
    json_out: bool = JSON_OPTION,
) -> None:
    """What this stack runs on EC2 and what it costs (scoped to the stack's tags)."""
    scope = stack_scope(ctx, region)
    try:
        session = aws_session(scope, aws_profile)
        raw = status_mod.collect(session, scope)
    except EksinfError as exc:
        # Unknown is not zero: say UNKNOWN with the reason, never print an empty list.
        if json_out:
            emit_json(status_mod.unknown_json(scope, exc.message))
        else:
            typer.echo(f"cost UNKNOWN: {exc.message}")
        raise EksinfError(
            "cost UNKNOWN: cannot query AWS for this stack",
            hint=exc.hint or "Fix the AWS access above and re-run.",
            exit_code=exc.exit_code if exc.exit_code == ENVIRONMENT else ENVIRONMENT,
        ) from exc
    report = status_mod.build_status(scope, raw, status_mod.load_prices())
    for message in report.warnings:
        warn(message)  # stderr in both modes, so --json stays clean
    if json_out:
        emit_json(status_mod.to_json(report))
        return
    for line in status_mod.format_text(report):
        typer.echo(line)
    progress(f"prices: src/eksinf/data/prices.json (as of {report.prices_as_of})")
