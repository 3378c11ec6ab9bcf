"""`eksinf addon-schemas refresh`: parse, call flows/addons.py, format (cli/aws.py registers
the group)."""

from __future__ import annotations

from pathlib import Path

import typer

from .common import (
    AWS_PROFILE_OPTION,
    JSON_OPTION,
    REGION_OPTION,
    emit_json,
    progress,
    stack_context,
)

addon_schemas_app = typer.Typer(
    help="EKS add-on configuration schemas recorded in the package (lint checks values with them).",
    no_args_is_help=True,
)


@addon_schemas_app.command("refresh")
def addon_schemas_refresh_cmd(
    ctx: typer.Context,
    region: str = REGION_OPTION,
    record: Path = typer.Option(
        None, "--record", help="The record to update. Default: the package's addon-schemas.json."
    ),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Print what would change; write nothing."
    ),
    aws_profile: str = AWS_PROFILE_OPTION,
    json_out: bool = JSON_OPTION,
) -> None:
    """Record eks:DescribeAddonConfiguration for the version each Addon unit pins (the profile
    linked in), so `eksinf lint` checks configurationValues against it offline."""
    from ..flows import addons as flow

    run = stack_context(ctx, json_out=json_out, region=region, aws_profile=aws_profile)
    done = flow.refresh(run, flow.RefreshOptions(record, dry_run))
    path = done.record
    if json_out:
        emit_json(done.as_json())
        return
    for what in ("added", "changed", "unchanged"):
        for item in done.refresh.as_json()[what]:
            typer.echo(f"{what:<9} {item}")
    if not done.dirty:
        typer.echo(f"{path}: up to date")
    elif dry_run:
        progress(f"(dry run; {path} not written)")
    else:
        typer.echo(f"wrote {path}")
