"""Helpers every command module shares: the stack option, output to stdout/stderr, JSON (the
parts without typer live in runstate.py and output.py)."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

import typer

from ..flows.context import AwsChoice, Output, StackContext
from ..model.config import HUB_BACKENDS
from .output import progress, table_text
from .runstate import State
from .runstate import emit_json as emit_json  # the command modules print their report with it

# stdout carries data; stderr carries progress, warnings and errors, as plain lines (no rich
# console: its import costs more than a whole cached render).


def one_of(choices: Iterable[str]) -> str:
    """An option's metavar that names its choices, in the style typer gives every value
    (`<str>`, `<path>`): `<mgmt|workload>`."""
    return "<" + "|".join(choices) + ">"


def state(ctx: typer.Context) -> State:
    return ctx.find_root().obj or State()


def stack_context(
    ctx: typer.Context,
    *,
    hub: str | None = None,
    json_out: bool = False,
    region: str | None = None,
    aws_profile: str | None = None,
) -> StackContext:
    """The command's one StackContext, from the global options and its own (built on first
    call; a later call in the same command gets the same one)."""
    run = state(ctx)
    if run.context is None:
        run.context = StackContext(
            run.stack(),
            hub,
            Output(json=json_out, colour=_colour(), say=progress),
            AwsChoice(region, aws_profile),
        )
    return run.context


def _colour() -> bool:
    import os

    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


def _use_mirror(value: Path | None) -> Path | None:
    from ..flows.run import use_mirror

    use_mirror(value)
    return value


# Every command that reads a pinned input (chart archives, the pinned Argo CD and HyperPod
# manifests beside them in `../manifests`) takes this option; parsing it sets the run's mirror.
MIRROR_OPTION = typer.Option(
    None,
    "--chart-mirror",
    metavar="<dir>",
    help="Offline mirror: chart archives (<chart>-<version>.tgz) tried before upstream; pinned "
    "manifests from manifests/ beside it. Default: $EKSINF_CHART_MIRROR, else mirror: in "
    ".eksinf/config.yaml, else ../shared/charts beside the stack.",
    file_okay=False,
    callback=_use_mirror,
)


def _use_hub(value: str | None) -> str | None:
    from ..flows.run import use_hub

    use_hub(value)
    return value


# Every command that opens the hub takes this option; parsing it sets the run's backend.
HUB_OPTION = typer.Option(
    None,
    "--hub",
    metavar=one_of(HUB_BACKENDS),
    help="Hub backend: local (SQLite) or cub. Default: .eksinf/config.yaml's hub:, else cub "
    "when run as `cub eksinf`, else local.",
    callback=_use_hub,
)
REGION_OPTION = typer.Option(
    None, "--region", help="AWS region. Default: the platform profile's region."
)
AWS_PROFILE_OPTION = typer.Option(
    None,
    "--aws-profile",
    help="AWS CLI profile for every AWS, kubectl and Helm call of this command. "
    "Default: $AWS_PROFILE as it was when the command started.",
)
JSON_OPTION = typer.Option(False, "--json", help="Print machine-readable JSON on stdout.")


def print_table(rows: list[dict[str, str]], columns: tuple[str, ...]) -> None:
    """output.table_text on stdout, in one write (a long listing is not a call per line)."""
    text = table_text(rows, columns)
    if text is not None:
        typer.echo(text)
